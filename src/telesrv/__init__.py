"""telesrv: a Telegram-compatible server."""

__version__ = "0.1.0"
