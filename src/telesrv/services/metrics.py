"""What the message path counts: sends, refusals by the rate limit, failed pts fills."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

MESSAGES_SENT = Counter(
    "telesrv_messages_sent_total",
    "Messages committed by a send (a retry answered from the first send is not counted).",
    ["kind"],
)
MESSAGE_BYTES = Counter(
    "telesrv_message_text_bytes_total", "UTF-8 bytes of the text of the messages sent."
)
RATE_LIMITED = Counter(
    "telesrv_messages_rate_limited_total",
    "Sends refused with FLOOD_WAIT by the per-user rate limit.",
)
PTS_FILL_FAILURES = Counter(
    "telesrv_pts_fill_failures_total",
    "Allocated pts that could not be filled with a noop after a failed write: each "
    "leaves a hole until the stale-hole repair fills it. Alert on any increase.",
)
AUTH_KEYS_CREATED = Counter(
    "telesrv_auth_keys_created_total",
    "Auth keys stored after a handshake, by kind: 'perm' or 'temp'.",
    ["kind"],
)
AUTH_KEYS_CACHED = Gauge("telesrv_auth_keys_cached", "Auth keys held in the lookup cache.")
