"""Group commit on Citus: tests/store/test_send_groups.py and
tests/services/test_send_groups.py, unchanged, against the cluster, where each send of a
group is its two halves on its users' shards and the group commits once; and the
commands a group of sends between users on two workers sends the workers."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from services.test_send_groups import *  # noqa: F403 - the same tests, collected here again
from store.test_send_groups import *  # noqa: F403

from telesrv.store import send_halves
from telesrv.store.messages import SendResult
from telesrv.store.refusals import ReplyMessageIdInvalid

from .test_send_halves import migrated, params, users_on_two_workers

__all__ = ["migrated"]


@pytest.fixture(scope="module")
def database_url(migrated: str) -> str:
    return migrated


async def remote_commands(conn: asyncpg.Connection, units: Any) -> tuple[list[Any], list[str]]:
    """The outcomes of ``units`` written as one group, and the commands the coordinator
    sent the workers for it (their first words, calls named)."""
    commands: list[str] = []

    def listen(_: Any, message: asyncpg.PostgresLogMessage) -> None:
        text = str(message.message)
        if text.startswith("issuing "):
            command = text.removeprefix("issuing ")
            words = command.split()
            named = next((w for w in words if w.startswith("telesrv_send_")), None)
            commands.append(named.split("(", 1)[0] if named else words[0])

    await conn.execute("SET citus.log_remote_commands = on")
    await conn.execute("SET client_min_messages = log")
    conn.add_log_listener(listen)
    try:
        async with conn.transaction():
            outcomes = await send_halves.send_units_halves_txn(conn, units)
    finally:
        conn.remove_log_listener(listen)
        await conn.execute("RESET client_min_messages")
        await conn.execute("RESET citus.log_remote_commands")
    return outcomes, commands


async def test_a_group_is_each_sends_halves_and_one_two_phase_commit(database_url: str) -> None:
    """Four lone sends between users on two workers, one of them refused (a reply to a
    message not in the chat): one call per user per send on that user's shard, the
    refused send's recipient half never called, and one PREPARE and one COMMIT PREPARED
    per worker for the whole group."""
    conn = await asyncpg.connect(database_url)
    try:
        pairs = [await users_on_two_workers(conn, 8_600_001 + 1000 * k) for k in range(4)]
        sends = [params(a, b, 1, (1, 1)) for a, b in pairs]
        sends[2] = params(*pairs[2], 1, (1, 1), reply_to=99)
        # From the larger id: that sender's dialog is written in a third call.
        sends[3] = params(pairs[3][1], pairs[3][0], 1, (1, 1))
        outcomes, commands = await remote_commands(conn, [[p] for p in sends])
    finally:
        await conn.close()

    assert isinstance(outcomes[2], ReplyMessageIdInvalid)
    for i in (0, 1, 3):
        [result] = outcomes[i]
        assert isinstance(result, SendResult) and not result.duplicate
        assert (result.sender_box, result.recipient_box) == (1, 1)
    calls = [c for c in commands if c.startswith("telesrv_send_")]
    assert sorted(calls) == sorted(
        ["telesrv_send_sender_half_or_refusal"] * 4
        + ["telesrv_send_recipient_half"] * 3
        + ["telesrv_send_sender_dialog"]
    ), commands
    assert commands.count("PREPARE") == 2 and commands.count("COMMIT") == 2, commands
    assert "SAVEPOINT" not in commands, commands
