"""What the message path counts: sends, refusals by the rate limit, failed pts fills."""

from __future__ import annotations

import functools

from prometheus_client import Counter, Gauge

# Counted where pts are filled: here after a failed write, in the counters after a
# partly failed allocation.
from telesrv.store.metrics import PTS_FILL_FAILURES as PTS_FILL_FAILURES

MESSAGES_SENT = Counter(
    "telesrv_messages_sent_total",
    "Messages committed by a send (a retry answered from the first send is not counted).",
    ["kind"],
)
# A send counts under its kind: a few fixed labels, whose series are looked up once.
messages_sent = functools.cache(MESSAGES_SENT.labels)
MESSAGE_BYTES = Counter(
    "telesrv_message_text_bytes_total", "UTF-8 bytes of the text of the messages sent."
)
RATE_LIMITED = Counter(
    "telesrv_messages_rate_limited_total",
    "Sends refused with FLOOD_WAIT by the per-user rate limit.",
)
AUTH_KEYS_CREATED = Counter(
    "telesrv_auth_keys_created_total",
    "Auth keys stored after a handshake, by kind: 'perm' or 'temp'.",
    ["kind"],
)
AUTH_KEYS_CACHED = Gauge(
    "telesrv_auth_keys_cached",
    "Auth keys held in the lookup cache.",
    multiprocess_mode="livesum",
)
LOGIN_CODE_DELIVERY_ATTEMPTS = Counter(
    "telesrv_login_code_delivery_attempts_total",
    "Runs of a login code delivery hook (retries included), by hook: 'command' or 'webhook'.",
    ["hook"],
)
LOGIN_CODE_DELIVERY_FAILURES = Counter(
    "telesrv_login_code_delivery_failures_total",
    "Runs of a login code delivery hook that failed (error, timeout, non-2xx), by hook.",
    ["hook"],
)
LOGIN_CODE_UNDELIVERED = Counter(
    "telesrv_login_codes_undelivered_total",
    "Login codes a hook gave up on (every retry failed) or dropped (too many pending), by hook.",
    ["hook"],
)
