"""A send whose updates its own process pushes announces its pts before its transaction
and settles them once it is over, pushed or not: pushes of later pts of the same users
wait for it meanwhile (tests/delivery/test_outbox_order.py), and never for a send
that is over. Real PostgreSQL and Redis."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from conftest import MakeServer

from telesrv.delivery.held_pushes import HeldPushes
from telesrv.server import Server
from telesrv.services.held_pushes import received_copy
from telesrv.services.messages import MessageService, Origin, OutgoingText
from telesrv.store import messages as messages_store
from telesrv.store.counters import Counters, send_claims_since_key
from telesrv.store.db import Db
from telesrv.store.messages import BoxMessage
from telesrv.store.update_log import UpdateEvent

ORIGIN = Origin(auth_key_id=11, session_id=22)
_ids = itertools.count(6_400_000)


class Held:
    """The dispatcher's side, recording what the send tells it, in order."""

    lease = 30.0
    pushes_held = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[int, ...]]]] = []

    async def push_held(
        self, events: Sequence[tuple[UpdateEvent, tuple[int, int] | None]], boxes: Sequence[Any]
    ) -> None:
        self.calls.append(("push", sorted((e.user_id, e.pts) for e, _ in events)))

    async def push_written(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("written", sorted(ranges)))

    def expect_pts(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("expect", sorted(ranges)))

    def settle_pts(self, ranges: Sequence[tuple[int, int, int]]) -> None:
        self.calls.append(("settle", sorted(ranges)))


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
def server(make_server: MakeServer, held: Held, monkeypatch: pytest.MonkeyPatch) -> Server:
    """The server's outbox dispatcher, as when its workers run, with its side of a send
    recorded by ``held`` instead of pushed."""
    server = make_server()
    assert server.outbox.held is not None
    monkeypatch.setattr(HeldPushes, "pushes_held", property(lambda self: True))
    for name in ("push_held", "push_written", "expect_pts", "settle_pts"):
        monkeypatch.setattr(server.outbox.held, name, getattr(held, name))
    return server


@pytest.fixture
def counters(server: Server) -> Counters:
    return server.counters


@pytest.fixture
def messages(server: Server) -> MessageService:
    assert server.parts is not None
    return server.parts.messages


def text(sender: int, recipient: int, random_id: int) -> OutgoingText:
    return OutgoingText(sender=sender, recipient=recipient, random_id=random_id, text="hi")


async def test_a_send_announces_its_pts_then_pushes_then_settles(
    messages: MessageService, held: Held
) -> None:
    a, b = next(_ids), next(_ids)
    await messages.send_text(text(a, b, 1), ORIGIN, now=1000)
    both = [(a, 1, 1), (b, 1, 1)]
    assert held.calls == [("expect", both), ("push", [(a, 1), (b, 1)]), ("settle", both)]


async def test_a_send_to_oneself_announces_one_range(messages: MessageService, held: Held) -> None:
    a = next(_ids)
    await messages.send_text(text(a, a, 1), ORIGIN, now=1000)
    assert held.calls == [("expect", [(a, 1, 1)]), ("push", [(a, 1)]), ("settle", [(a, 1, 1)])]


async def test_a_failed_send_settles_what_it_announced(
    messages: MessageService, held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = next(_ids), next(_ids)
    seen: list[list[tuple[str, list[tuple[int, ...]]]]] = []

    async def broken(*args: Any, **kwargs: Any) -> Any:
        seen.append(list(held.calls))
        raise RuntimeError("the database went away")

    monkeypatch.setattr(messages_store, "send_private_message_txn", broken)
    with pytest.raises(RuntimeError):
        await messages.send_text(text(a, b, 1), ORIGIN, now=1000)
    both = [(a, 1, 1), (b, 1, 1)]
    assert seen == [[("expect", both)]]  # announced before the transaction
    assert held.calls == [("expect", both), ("settle", both)]  # nothing pushed


async def test_a_duplicate_found_in_the_transaction_settles_without_a_push(
    messages: MessageService, held: Held, counters: Counters, redis: Any
) -> None:
    a, b = next(_ids), next(_ids)
    await messages.send_text(text(a, b, 1), ORIGIN, now=1000)
    # A retry after its claim ran out, in a Redis that has kept the sender's claims for
    # longer than a claim lives (so a free claim is taken as a new send): only the
    # send function finds the first send.
    await counters.release_send(a, 1)
    await redis.set(send_claims_since_key(a), 0)
    held.calls.clear()
    again = await messages.send_text(text(a, b, 1), ORIGIN, now=1001)
    assert again.pts == 1  # the first send's answer
    both = [(a, 2, 2), (b, 2, 2)]  # the pts it took become noops
    assert held.calls == [("expect", both), ("settle", both)]


async def test_a_reply_is_held_announced_then_read_back_and_pushed(
    messages: MessageService, held: Held, db: Db
) -> None:
    # A reply is not pushed from what the send has in hand (its box in the recipient's
    # ids is looked up inside the transaction): its rows are held all the same, and
    # read back and pushed from here once committed.
    a, b = next(_ids), next(_ids)
    first = await messages.send_text(text(a, b, 1), ORIGIN, now=1000)
    held.calls.clear()
    reply = OutgoingText(
        sender=a, recipient=b, random_id=2, text="re", reply_to=first.message.box_id
    )
    await messages.send_text(reply, ORIGIN, now=1001)
    both = [(a, 2, 2), (b, 2, 2)]
    # Settled by the held pushes once pushed, not by the send.
    assert held.calls == [("expect", both), ("written", both)]
    assert await due_in(db, [(a, 2), (b, 2)]) == [True, True]


async def test_an_album_is_held_and_read_back(messages: MessageService, held: Held, db: Db) -> None:
    a, b = next(_ids), next(_ids)
    album = [
        OutgoingText(sender=a, recipient=b, random_id=n, text=f"part {n}", grouped_id=77)
        for n in (1, 2)
    ]
    await messages.send_album(album, ORIGIN, now=1000)
    both = [(a, 1, 2), (b, 1, 2)]
    assert held.calls == [("expect", both), ("written", both)]
    assert await due_in(db, [(a, 1), (a, 2), (b, 1), (b, 2)]) == [True] * 4


async def due_in(db: Db, keys: list[tuple[int, int]]) -> list[bool]:
    """For each (user, pts): whether its outbox row is held (due later than now)."""
    rows = await db.pool.fetch(
        """
        SELECT k.user_id, k.pts, o.available_at > now() + interval '10 seconds' AS held
          FROM unnest($1::bigint[], $2::integer[]) WITH ORDINALITY AS k(user_id, pts, ord)
          JOIN dispatch_outbox o ON o.target_user_id = k.user_id AND o.pts = k.pts
         ORDER BY k.ord
        """,
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return [r["held"] for r in rows]


def test_the_received_copy_is_the_sent_one_in_the_recipients_ids() -> None:
    """Every field of the sender's copy reaches the recipient's, but for the owner's
    side and whether its content is unopened: each given a value no other field has,
    so a field added to BoxMessage and not copied fails here."""
    values: dict[str, Any] = {
        f.name: f"value {i}" for i, f in enumerate(dataclasses.fields(BoxMessage))
    }
    sent = BoxMessage(**values)
    received = received_copy(sent, 77, content_unread=True)
    assert received == dataclasses.replace(
        sent,
        owner_user_id=sent.peer_user_id,
        box_id=77,
        peer_user_id=sent.owner_user_id,
        out=False,
        media_unread=True,
    )
