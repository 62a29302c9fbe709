"""What the Node and browser tests let through of a client's complaints: only the lines
of key exchanges it failed on a key the server logged as beginning with a zero byte."""

from __future__ import annotations

import pytest

from .drivers import GRAMJS_DROPPED_ZERO, MTCUTE_DROPPED_ZERO, unexplained_complaints

ZERO_KEY = "new auth key 00ab for 127.0.0.1:5 begins with a zero byte"
MTCUTE_FAILURE = [
    "[ERR] [conn] [DC 2] Authorization error: Error: Step 4: invalid nonce hash from server",
    "[ERR] [client] unhandled error: Error: Step 4: invalid nonce hash from server",
]
GRAMJS_FAILURE = [
    "[ERROR] - [WebSocket connection failed attempt: 1]",
    "SecurityError: Step 3 invalid new nonce hash",
    "    at doAuthentication (Authenticator.js:189:15)",
]


def _complaints(lines: list[str]) -> list[str]:
    return [line for line in lines if "[ERR]" in line or "[ERROR]" in line]


def test_a_failure_on_a_logged_zero_key_is_let_through() -> None:
    lines = ["[INF] connected", *MTCUTE_FAILURE, "[INF] authorization successful"]
    left = unexplained_complaints(
        _complaints(lines), "\n".join(lines), [ZERO_KEY], MTCUTE_DROPPED_ZERO
    )
    assert left == []
    left = unexplained_complaints(
        _complaints(GRAMJS_FAILURE), "\n".join(GRAMJS_FAILURE), [ZERO_KEY], GRAMJS_DROPPED_ZERO
    )
    assert left == []


def test_a_failure_without_a_zero_key_fails() -> None:
    with pytest.raises(AssertionError, match="1 key exchanges failed"):
        unexplained_complaints(
            _complaints(MTCUTE_FAILURE), "\n".join(MTCUTE_FAILURE), [], MTCUTE_DROPPED_ZERO
        )
    # One zero key does not cover two failures.
    lines = MTCUTE_FAILURE * 2
    with pytest.raises(AssertionError, match="2 key exchanges failed"):
        unexplained_complaints(
            _complaints(lines), "\n".join(lines), [ZERO_KEY], MTCUTE_DROPPED_ZERO
        )


def test_other_complaints_are_kept() -> None:
    other = [
        "[ERR] [client] unhandled error: Error: FLOOD_WAIT_3",
        "[WRN] [conn] received unexpected ack for ping query 7",
        "[ERR] [conn] Authorization error: Error: Step 4: invalid retry nonce hash from server",
    ]
    lines = [*MTCUTE_FAILURE, *other]
    complaints = _complaints(lines) + [other[1]]
    left = unexplained_complaints(complaints, "\n".join(lines), [ZERO_KEY], MTCUTE_DROPPED_ZERO)
    assert left == [other[0], other[2], other[1]]
    # A failed attempt of GramJS's with another error below it is kept.
    lines = ["[ERROR] - [WebSocket connection failed attempt: 2]", "Error: socket hang up"]
    lines += GRAMJS_FAILURE
    left = unexplained_complaints(
        _complaints(lines), "\n".join(lines), [ZERO_KEY], GRAMJS_DROPPED_ZERO
    )
    assert left == ["[ERROR] - [WebSocket connection failed attempt: 2]"]
