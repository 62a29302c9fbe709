"""A send on Citus: the sender's half, then the recipient's, in the caller's transaction.

On Citus the one-call send (``telesrv_send_private_message``) runs on the coordinator
and sends each of its statements to a worker one after another. Its two halves are
functions distributed by their user (``store/citus.py`` ``DELEGATED``): each call runs
whole on that user's shard, so a send is one statement per user plus the commit. Plain
PostgreSQL keeps the one-call send (``messages.send_private_message_txn``).

Several sends in one transaction (an album, a group of sends committed together) are
each send's halves in turn: a delegated call runs on the shard of one user, so one call
cannot carry the halves of several users, even of users whose rows share a shard. What a
group saves on Citus is the commit: one two-phase commit for the group instead of one
per send.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from telesrv.store import messages as messages_store
from telesrv.store.db import refusal_named, sql_refusal
from telesrv.store.messages import SendParams, SendResult


async def send_private_message_halves_txn(conn: asyncpg.Connection, p: SendParams) -> SendResult:
    """What ``send_private_message_txn`` writes and returns, in two calls (three when the
    sender's user id is the larger, see below): the sender's half, then (unless the
    recipient gets nothing: saved messages, or blocked as seen before) the recipient's.
    Must run in a transaction.

    The two dialogs are locked in user id order, as everywhere (the one-call send,
    readHistory, edits and deletes): when the sender's id is the larger, its dialog is
    written by a third call after the recipient's half (``sender_dialog_txn``)."""
    dialog_later = _dialog_later(p)
    sent = await sender_half_txn(conn, p, dialog=not dialog_later)
    got = await recipient_half_txn(conn, p, sent)
    bar_closed = sent["sender_bar_closed"]
    if dialog_later and not sent["duplicate"]:
        bar_closed = await sender_dialog_txn(conn, p)
    return _result(sent, got, bar_closed)


def _result(
    sent: asyncpg.Record, got: asyncpg.Record | None, bar_closed: bool | None
) -> SendResult:
    return SendResult(
        duplicate=sent["duplicate"],
        message_id=sent["message_id"],
        sender_box=sent["sender_box"],
        sender_pts=sent["sender_pts"],
        recipient_box=None if got is None else got["recipient_box"],
        recipient_pts=None if got is None else got["recipient_pts"],
        date=sent["msg_date"],
        recipient_folder_id=None if got is None else got["recipient_folder_id"],
        sender_bar_closed=bar_closed,
    )


def _dialog_later(p: SendParams) -> bool:
    """Whether the sender's dialog is written after the recipient's half (the sender's
    id is the larger, and the recipient's dialog is written)."""
    return _recipient_written(p) and p.sender > p.recipient


def _recipient_written(p: SendParams) -> bool:
    """Whether the send may write the recipient's rows (not saved messages, nor a block
    the caller saw)."""
    return p.recipient_pts is not None and p.recipient != p.sender


# The sender's half, and its form for groups (the same arguments, ``_sender_half_args``).
_SENDER_HALF = """
SELECT duplicate, message_id, sender_box, sender_pts, msg_date,
       sender_bar_closed, reply_message_id, reply_sender_id
  FROM telesrv_send_sender_half(
       p_sender => $1, p_recipient => $2, p_random_id => $3, p_date => $4,
       p_message => $5, p_entities => $6, p_fwd_from => $7, p_silent => $8,
       p_noforwards => $9, p_reply_to => $10, p_quote_text => $11,
       p_quote_entities => $12, p_quote_offset => $13, p_sender_pts => $14,
       p_sender_box => $15, p_exclude_auth_key_id => $16,
       p_exclude_session_id => $17, p_media => $18, p_media_id => $19,
       p_media_kind => $20, p_grouped_id => $21, p_outbox_hold => $22,
       p_dialog => $23)
"""

_SENDER_HALF_OR_REFUSAL = """
SELECT duplicate, message_id, sender_box, sender_pts, msg_date,
       sender_bar_closed, reply_message_id, reply_sender_id, refusal
  FROM telesrv_send_sender_half_or_refusal(
       p_sender => $1, p_recipient => $2, p_random_id => $3, p_date => $4,
       p_message => $5, p_entities => $6, p_fwd_from => $7, p_silent => $8,
       p_noforwards => $9, p_reply_to => $10, p_quote_text => $11,
       p_quote_entities => $12, p_quote_offset => $13, p_sender_pts => $14,
       p_sender_box => $15, p_exclude_auth_key_id => $16,
       p_exclude_session_id => $17, p_media => $18, p_media_id => $19,
       p_media_kind => $20, p_grouped_id => $21, p_outbox_hold => $22,
       p_dialog => $23)
"""

_RECIPIENT_HALF = """
SELECT recipient_box, recipient_pts, recipient_folder_id
  FROM telesrv_send_recipient_half(
       p_recipient => $1, p_sender => $2, p_message_id => $3,
       p_duplicate => $4, p_date => $5, p_message => $6, p_silent => $7,
       p_noforwards => $8, p_media_unread => $9, p_reply_message_id => $10,
       p_reply_sender_id => $11, p_recipient_pts => $12,
       p_recipient_box => $13, p_media_kind => $14, p_outbox_hold => $15)
"""

_SENDER_DIALOG = (
    "SELECT telesrv_send_sender_dialog(p_sender => $1, p_recipient => $2,"
    " p_sender_box => $3, p_date => $4)"
)


def _sender_half_args(p: SendParams, dialog: bool) -> tuple[object, ...]:
    return (
        p.sender,
        p.recipient,
        p.random_id,
        p.date,
        p.message,
        p.entities,
        p.fwd_from,
        p.silent,
        p.noforwards,
        p.reply_to,
        p.quote_text,
        p.quote_entities,
        p.quote_offset,
        p.sender_pts,
        p.sender_box,
        p.exclude_auth_key_id,
        p.exclude_session_id,
        p.media,
        p.media_id,
        p.media_kind,
        p.grouped_id,
        p.outbox_hold,
        dialog,
    )


def _recipient_half_args(p: SendParams, sent: asyncpg.Record) -> tuple[object, ...]:
    return (
        p.recipient,
        p.sender,
        sent["message_id"],
        sent["duplicate"],
        p.date,
        p.message,
        p.silent,
        p.noforwards,
        p.media_unread,
        sent["reply_message_id"],
        sent["reply_sender_id"],
        p.recipient_pts,
        p.recipient_box,
        p.media_kind,
        p.outbox_hold,
    )


def _sender_dialog_args(p: SendParams) -> tuple[object, ...]:
    return (p.sender, p.recipient, p.sender_box, p.date)


async def sender_half_txn(
    conn: asyncpg.Connection, p: SendParams, *, dialog: bool = True
) -> asyncpg.Record:
    """The sender's rows of the send, on the sender's shard; its row for the other half.
    ``dialog``: the sender's dialog too (else ``sender_dialog_txn`` writes it later)."""
    try:
        sent = await conn.fetchrow(_SENDER_HALF, *_sender_half_args(p, dialog))
    except asyncpg.RaiseError as e:
        raise sql_refusal(e) from None
    assert sent is not None
    return sent


async def recipient_half_txn(
    conn: asyncpg.Connection, p: SendParams, sent: asyncpg.Record
) -> asyncpg.Record | None:
    """The recipient's rows of the send, on the recipient's shard, after the sender's
    half returned ``sent``; None when the recipient is not written at all."""
    if not _recipient_written(p):
        return None
    return await conn.fetchrow(_RECIPIENT_HALF, *_recipient_half_args(p, sent))


async def sender_dialog_txn(conn: asyncpg.Connection, p: SendParams) -> bool | None:
    """The sender's dialog after the recipient's half, on the sender's shard; whether
    the sender's action bar in the chat was closed already."""
    closed = await conn.fetchval(_SENDER_DIALOG, *_sender_dialog_args(p))
    return None if closed is None else bool(closed)


async def send_private_messages_halves_txn(
    conn: asyncpg.Connection, batch: Sequence[SendParams]
) -> list[SendResult]:
    """Several sends of one sender (an album, a forward's copies), each as
    ``send_private_message_halves_txn``, in the given order, in the caller's transaction:
    a refusal raises, and the caller's transaction writes none of them."""
    return [await send_private_message_halves_txn(conn, p) for p in batch]


async def send_units_halves_txn(
    conn: asyncpg.Connection, units: Sequence[Sequence[SendParams]]
) -> list[list[SendResult] | Exception]:
    """Units of sends committed together on Citus, in the caller's transaction, as
    ``messages.send_units_txn`` does on plain PostgreSQL: each unit's results, or its
    refusal (that unit alone wrote nothing; the others commit).

    The lone sends go first, in three pipelined rounds (each a round trip to the
    coordinator, which runs the calls one by one, each on its user's shard): their
    sender halves, in the group's order (a duplicate random_id in the group finds the
    send before it), each answering its refusal as a row; the recipient halves of those
    not refused; the sender dialogs written after the recipient's. Then each unit of
    several, under a savepoint: all of it or none."""
    return await messages_store.units_txn(
        conn, units, _lone_sends_txn, send_private_messages_halves_txn
    )


async def _lone_sends_txn(
    conn: asyncpg.Connection, sends: Sequence[SendParams]
) -> list[SendResult | Exception]:
    sent = await _fetch_each(
        conn, _SENDER_HALF_OR_REFUSAL, [_sender_half_args(p, not _dialog_later(p)) for p in sends]
    )
    outcomes: list[SendResult | Exception | None] = [
        refusal_named(row["refusal"]) if row["refusal"] is not None else None for row in sent
    ]
    to_recipient = [i for i, p in enumerate(sends) if outcomes[i] is None and _recipient_written(p)]
    got: dict[int, asyncpg.Record] = dict(
        zip(
            to_recipient,
            await _fetch_each(
                conn,
                _RECIPIENT_HALF,
                [_recipient_half_args(sends[i], sent[i]) for i in to_recipient],
            ),
            strict=True,
        )
    )
    dialog_later = [
        i
        for i, p in enumerate(sends)
        if outcomes[i] is None and _dialog_later(p) and not sent[i]["duplicate"]
    ]
    closed: dict[int, asyncpg.Record] = dict(
        zip(
            dialog_later,
            await _fetch_each(
                conn, _SENDER_DIALOG, [_sender_dialog_args(sends[i]) for i in dialog_later]
            ),
            strict=True,
        )
    )
    results: list[SendResult | Exception] = []
    for i, outcome in enumerate(outcomes):
        if outcome is not None:
            results.append(outcome)
            continue
        bar_closed = sent[i]["sender_bar_closed"]
        if i in closed:
            value = closed[i][0]
            bar_closed = None if value is None else bool(value)
        results.append(_result(sent[i], got.get(i), bar_closed))
    return results


async def _fetch_each(
    conn: asyncpg.Connection, query: str, args: Sequence[tuple[object, ...]]
) -> list[asyncpg.Record]:
    """``query`` once per argument tuple, pipelined (one round trip), each giving one row."""
    if not args:
        return []
    rows = await conn.fetchmany(query, args)
    if len(rows) != len(args):
        # Never expected (each call returns one row); the group is written again send by
        # send, where each call's row is read alone.
        raise RuntimeError(f"{len(rows)} rows for {len(args)} calls")
    return list(rows)
