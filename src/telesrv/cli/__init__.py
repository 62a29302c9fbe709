"""The `telesrv` command line: one module per command (or command group), put
together here under the root group `main`.

Benchmarks plug in without editing it: every module `telesrv/bench/<name>.py`
(names starting with `_` excluded) that defines a click command named `command`
becomes `telesrv bench <name>` (see `telesrv.cli.bench`).
"""

from __future__ import annotations

from telesrv.cli import accel, bench, blobs, check, key, outbox, serve, sessions, stats, users
from telesrv.cli.root import JsonFormatter, main

__all__ = ["JsonFormatter", "main"]

main.add_command(serve.serve)
main.add_command(serve.worker_command)
main.add_command(check.check_command)
main.add_command(key.key_command)
main.add_command(users.users)
main.add_command(users.codes)
main.add_command(sessions.sessions)
main.add_command(outbox.outbox)
main.add_command(blobs.blobs)
main.add_command(stats.stats)
main.add_command(bench.bench)
main.add_command(accel.accel_group)
