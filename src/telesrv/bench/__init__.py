"""Benchmarks run by ``telesrv bench NAME``; each module defines a click ``command``."""
