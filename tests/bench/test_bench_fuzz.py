"""`telesrv bench fuzz`: mutated frames after a real key exchange never crash the stack."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from telesrv.bench import fuzz
from telesrv.cli import main
from telesrv.mtproto.session import ServerSession


def test_twenty_thousand_mutated_frames_without_a_crash() -> None:
    result = CliRunner().invoke(
        main, ["bench", "fuzz", "--frames", "20000", "--seed", "7"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:2] == ["frames", "crashes"]
    figures = json.loads(lines[-1])
    assert figures["bench"] == "fuzz"
    assert figures["frames"] == 20000
    assert figures["crashes"] == 0, figures["first_crash"]
    # Most frames pass decryption and reach the session and its TL decoder; some
    # still decode as requests after mutation.
    assert figures["reached_session"] > 0.9 * figures["frames"]
    assert figures["request_decoded"] > 0
    assert figures["refused_by_crypto"] > 0
    assert figures["sessions"] <= 64  # new session ids keep coming; the key keeps 64


def test_the_harness_counts_what_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    receive = ServerSession.receive
    calls = 0

    def fragile(self: ServerSession, plaintext: bytes, now: float) -> list[object]:
        nonlocal calls
        calls += 1
        if calls == 10:
            raise TypeError("escaped")
        return receive(self, plaintext, now)  # type: ignore[return-value]

    monkeypatch.setattr(ServerSession, "receive", fragile)
    figures = fuzz.run(50, seed=1)
    assert figures["crashes"] == 1 and "TypeError: escaped" in figures["first_crash"]
