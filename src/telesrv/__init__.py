"""telesrv: a Telegram-compatible server."""

from telesrv import accel as _accel

__version__ = "0.1.0"

# First, before any submodule loads: the compiled TL/MTProto modules, when built and
# current, are found ahead of their Python sources (telesrv/accel.py).
ACCEL = _accel.activate()
