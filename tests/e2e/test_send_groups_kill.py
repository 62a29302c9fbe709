"""A SIGKILL of `telesrv serve` while a group of sends is being written loses no
acknowledged message.

Many raw MTProto clients send at once, each the next message as soon as the previous one
is answered, so sends queue behind the one in flight and are written in groups. The
server is killed while PostgreSQL is running a group's statement (seen in
pg_stat_activity), then started again on the same data directory and database. Then:
every send that was answered is there, in the sender's box under the id it was answered
with and in the recipient's box; the sends that had no answer, retried with the same
random_id, each make one message (whether the killed process had written them or not);
and every owner's pts log is dense once the holes the killed process left are repaired.
What was in flight at the kill differs from run to run; what is asserted does not.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import warnings
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from serve_process import dev_flags, serve_args, serving

from telesrv.bench._client import ClientError, PublicKey
from telesrv.bench._e2e_load import Device
from telesrv.config import Settings
from telesrv.services.messages import SEND_CLAIM_WAIT_MS
from telesrv.services.updates import HOLE_GRACE, UpdatesService
from telesrv.store import db as dbmod
from telesrv.store.counters import Counters
from telesrv.store.redis_client import open_redis
from telesrv.tl import functions, types

CODE = "13579"
USERS = 24  # senders at once: each sends to the next one round a ring
ANSWERED_BEFORE_KILL = 150  # the kill waits for this many answers (and a group in flight)
GUARD = 60.0  # only against a hang
TIMEOUT_ATTEMPTS = 3  # a send answered 500 TIMEOUT is sent again, this many times in all
# What attempts answered TIMEOUT may add to a phase for one sender: two sends one after
# the other (the unanswered one and an answered one again), each with all but its last
# attempt timed out, each of those past a statement's timeout (and the client's second
# more) after a pooled connection's.
_DEFAULTS = Settings()
TIMEOUT_GRACE = (
    2 * (TIMEOUT_ATTEMPTS - 1) * (_DEFAULTS.db_statement_timeout + 1 + _DEFAULTS.db_acquire_timeout)
)
_phones = itertools.count(15559700)


def serve_command(data_dir: Path, database_url: str, redis_url: str) -> list[str]:
    """`telesrv serve`, with group commit at its default."""
    return serve_args(
        data_dir,
        *dev_flags(CODE),
        database_url=database_url,
        redis_url=redis_url,
        before=("--log-level", "warning"),
    )


def server_key(data_dir: Path) -> PublicKey:
    pem = (data_dir / "server_key.pub.pem").read_bytes()
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, rsa.RSAPublicKey)
    numbers = key.public_numbers()
    return PublicKey(numbers.n, numbers.e)


def sent_id(answer: Any) -> int:
    """The sender's message id in sendMessage's answer."""
    if isinstance(answer, types.UpdateShortSentMessage):
        return int(answer.id)
    for update in getattr(answer, "updates", []):
        if isinstance(update, types.UpdateMessageID):
            return int(update.id)
    raise AssertionError(f"no message id in {answer!r}")


class Sender:
    """One user sending to the next one: what it sent, and what was answered."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.peer: Any = None  # InputPeerUser of the recipient
        self.recipient = 0
        self.attempted: list[int] = []  # random_ids, in order
        self.answered: dict[int, int] = {}  # random_id -> message id in the sender's box
        self.timeouts = 0  # requests answered 500 TIMEOUT and sent again

    async def send(self, random_id: int) -> None:
        request = functions.messages.SendMessage(
            peer=self.peer, message=f"kill {random_id}", random_id=random_id
        )
        for attempt in range(1, TIMEOUT_ATTEMPTS + 1):
            try:
                answer = await self.device.call(request)
                break
            except ClientError as e:
                # 500 TIMEOUT: the server gave up on its database in time (a statement
                # or a pooled connection past its timeout), which a loaded machine
                # may cause; a client sends the same request again, as Telegram's do.
                # Whatever the attempts wrote is checked below like any other send.
                if "500 TIMEOUT" not in str(e) or attempt == TIMEOUT_ATTEMPTS:
                    raise
                self.timeouts += 1
        self.answered[random_id] = sent_id(answer)

    async def retry_on(self, port: int) -> None:
        """On the new process: whatever had no answer again, with the same random_id;
        and one answered send again, which must find the original."""
        self.device.port = port
        await self.device.reconnect()
        for random_id in self.attempted:
            if random_id not in self.answered:
                await self.send(random_id)
        again = next(iter(self.answered))
        before = self.answered[again]
        await self.send(again)
        assert self.answered[again] == before

    async def send_until_cut(self, rng: random.Random) -> None:
        """New sends one after the other until the connection dies."""
        while True:
            random_id = rng.getrandbits(62)
            self.attempted.append(random_id)
            try:
                await self.send(random_id)
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                return


def timeout_causes(log: str) -> dict[str, int]:
    """The server log's lines of requests that timed out, counted by what they say:
    the method and the exception, without time stamps."""
    causes: dict[str, int] = {}
    for line in log.splitlines():
        head, found, said = line.partition(" timed out: ")
        if found:
            key = f"{head.rsplit(' ', 1)[-1]}: {said.strip()}"
            causes[key] = causes.get(key, 0) + 1
    return causes


async def group_in_flight(conn: asyncpg.Connection) -> bool:
    """PostgreSQL is running a group's statement of the server's right now. (The view
    keeps a statement's first kilobyte: the group's is told by the function it calls; on
    Citus, tests/citus, by the sender halves' call that answers refusals.)"""
    return bool(
        await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND state = 'active'"
            " AND pid <> pg_backend_pid()"
            " AND (query LIKE '%telesrv_send_group(%' OR query LIKE '%sender_half_or_refusal%')"
        )
    )


@pytest.mark.slow
async def test_sigkill_during_a_group_loses_no_acknowledged_send(
    tmp_path: Path, database_url: str, redis_url: str, redis: Any
) -> None:
    data_dir = tmp_path / "data"
    log_path = tmp_path / "serve.log"
    senders: list[Sender] = []
    async with serving(serve_command(data_dir, database_url, redis_url), log_path) as serve:
        key = server_key(data_dir)
        devices = [Device("127.0.0.1", serve.port, key, f"+{next(_phones)}") for _ in range(USERS)]
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*(d.log_in(CODE) for d in devices))
        senders = [Sender(d) for d in devices]
        for i, sender in enumerate(senders):
            to = devices[(i + 1) % USERS]
            imported = await sender.device.call(
                functions.contacts.ImportContacts(
                    contacts=[
                        types.InputPhoneContact(
                            client_id=1, phone=to.phone, first_name="r", last_name=""
                        )
                    ]
                )
            )
            [user] = [u for u in imported.users if u.id == to.user_id]
            sender.peer = types.InputPeerUser(user_id=to.user_id, access_hash=user.access_hash)
            sender.recipient = to.user_id

        rng = random.Random(34)
        load = [asyncio.ensure_future(s.send_until_cut(rng)) for s in senders]
        watcher = await asyncpg.connect(database_url)
        try:
            async with asyncio.timeout(GUARD + TIMEOUT_GRACE):
                while not (
                    sum(len(s.answered) for s in senders) >= ANSWERED_BEFORE_KILL
                    and await group_in_flight(watcher)
                ):
                    await asyncio.sleep(0.001)
                    if any(f.done() for f in load):
                        await asyncio.gather(*load)  # a sender failed: its error
                        raise AssertionError("a sender stopped before the kill")
            serve.process.kill()  # no clean-up of any kind, in the middle of that group
            await serve.process.wait()
        finally:
            await watcher.close()
        async with asyncio.timeout(GUARD):
            await asyncio.gather(*load)
    for sender in senders:
        await sender.device.close()
    answered_before = {s.device.user_id: dict(s.answered) for s in senders}
    unanswered = sum(len(s.attempted) - len(s.answered) for s in senders)
    assert sum(len(a) for a in answered_before.values()) >= ANSWERED_BEFORE_KILL
    assert unanswered <= USERS  # one at a time per sender
    killed_at = len(log_path.read_text(errors="replace"))

    async with serving(serve_command(data_dir, database_url, redis_url), log_path) as serve:
        # A retry of a send the killed process had begun finds that attempt's claim on
        # the random_id and waits for it until the claim wait runs out; the senders
        # retry at once, so the waits overlap.
        try:
            async with asyncio.timeout(GUARD + SEND_CLAIM_WAIT_MS / 1000 + TIMEOUT_GRACE):
                await asyncio.gather(*(s.retry_on(serve.port) for s in senders))
        except Exception as e:
            # What the servers logged (both processes, warnings and worse) says why.
            timeouts = sum(s.timeouts for s in senders)
            raise AssertionError(
                f"a retry failed: {e!r} ({timeouts} TIMEOUT answers)\n{serve.log()[-6000:]}"
            ) from e
        timeouts = sum(s.timeouts for s in senders)
        if timeouts:
            # Not a failure (nothing is lost by it), but worth seeing in the run's summary,
            # with what the server said of each: which wait ran out, in which process.
            log = serve.log()
            warnings.warn(
                f"{timeouts} sends were answered 500 TIMEOUT and sent again; the server "
                f"logged before the kill {timeout_causes(log[:killed_at])}, "
                f"after it {timeout_causes(log[killed_at:])}",
                stacklevel=1,
            )
        for sender in senders:
            assert set(sender.answered) == set(sender.attempted)
            for random_id, box_id in answered_before[sender.device.user_id].items():
                assert sender.answered[random_id] == box_id
            await sender.device.close()

    conn = await asyncpg.connect(database_url)
    try:
        users = [s.device.user_id for s in senders]
        for sender in senders:
            # Each user's rows by that user's key (on Citus, each on its own shard).
            rows = await conn.fetch(
                """
                SELECT m.id, m.random_id, s.box_id AS sender_box, m.recipient_user_id
                  FROM private_messages m
                  LEFT JOIN message_boxes s ON s.owner_user_id = m.sender_user_id
                                           AND s.message_id = m.id
                 WHERE m.sender_user_id = $1
                """,
                sender.device.user_id,
            )
            received = await conn.fetch(
                "SELECT message_id FROM message_boxes"
                " WHERE owner_user_id = $1 AND sender_user_id = $2",
                sender.recipient,
                sender.device.user_id,
            )
            # Exactly one message per random_id attempted, in both boxes (one box each),
            # under the id its answer gave.
            assert sorted(r["random_id"] for r in rows) == sorted(sender.attempted)
            assert sorted(r["message_id"] for r in received) == sorted(r["id"] for r in rows)
            for r in rows:
                assert r["recipient_user_id"] == sender.recipient
                assert r["sender_box"] == sender.answered[r["random_id"]]
    finally:
        await conn.close()

    # pts the killed process had taken for sends it never committed are holes until they
    # are stale; then they are filled (what updates.getState does), and each log is dense.
    db = await dbmod.open_db(database_url, min_size=1, max_size=1)
    redis_client = await open_redis(redis_url)
    try:
        updates = UpdatesService(db, Counters(redis_client, db))
        later = int(time.time()) + HOLE_GRACE + 5
        for user in users:
            await updates.contiguous(user, later)
        rows = await db.pool.fetch(
            "SELECT user_id, pts, pts_count FROM user_update_events"
            " WHERE user_id = ANY($1::bigint[]) ORDER BY user_id, pts",
            users,
        )
    finally:
        await redis_client.aclose()
        await db.close()
    ends: dict[int, int] = dict.fromkeys(users, 0)
    for r in rows:
        assert r["pts"] - r["pts_count"] == ends[r["user_id"]], dict(r)
        ends[r["user_id"]] = r["pts"]
    assert all(ends[u] > 0 for u in users)
