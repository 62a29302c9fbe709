"""A send on Citus: the sender's half, then the recipient's, in the caller's transaction.

On Citus the one-call send (``telesrv_send_private_message``) runs on the coordinator
and sends each of its statements to a worker one after another. Its two halves are
functions distributed by their user (``store/citus.py`` ``DELEGATED``): each call runs
whole on that user's shard, so a send is one statement per user plus the commit. Plain
PostgreSQL keeps the one-call send (``messages.send_private_message_txn``).
"""

from __future__ import annotations

import asyncpg

from telesrv.store.db import sql_refusal
from telesrv.store.messages import SendParams, SendResult


async def send_private_message_halves_txn(conn: asyncpg.Connection, p: SendParams) -> SendResult:
    """What ``send_private_message_txn`` writes and returns, in two calls (three when the
    sender's user id is the larger, see below): the sender's half, then (unless the
    recipient gets nothing: saved messages, or blocked as seen before) the recipient's.
    Must run in a transaction.

    The two dialogs are locked in user id order, as everywhere (the one-call send,
    readHistory, edits and deletes): when the sender's id is the larger, its dialog is
    written by a third call after the recipient's half (``sender_dialog_txn``)."""
    dialog_later = _recipient_written(p) and p.sender > p.recipient
    sent = await sender_half_txn(conn, p, dialog=not dialog_later)
    got = await recipient_half_txn(conn, p, sent)
    bar_closed = sent["sender_bar_closed"]
    if dialog_later and not sent["duplicate"]:
        bar_closed = await sender_dialog_txn(conn, p)
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


def _recipient_written(p: SendParams) -> bool:
    """Whether the send may write the recipient's rows (not saved messages, nor a block
    the caller saw)."""
    return p.recipient_pts is not None and p.recipient != p.sender


async def sender_half_txn(
    conn: asyncpg.Connection, p: SendParams, *, dialog: bool = True
) -> asyncpg.Record:
    """The sender's rows of the send, on the sender's shard; its row for the other half.
    ``dialog``: the sender's dialog too (else ``sender_dialog_txn`` writes it later)."""
    try:
        sent = await conn.fetchrow(
            """
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
            """,
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
    return await conn.fetchrow(
        """
            SELECT recipient_box, recipient_pts, recipient_folder_id
              FROM telesrv_send_recipient_half(
                   p_recipient => $1, p_sender => $2, p_message_id => $3,
                   p_duplicate => $4, p_date => $5, p_message => $6, p_silent => $7,
                   p_noforwards => $8, p_media_unread => $9, p_reply_message_id => $10,
                   p_reply_sender_id => $11, p_recipient_pts => $12,
                   p_recipient_box => $13, p_media_kind => $14, p_outbox_hold => $15)
            """,
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


async def sender_dialog_txn(conn: asyncpg.Connection, p: SendParams) -> bool | None:
    """The sender's dialog after the recipient's half, on the sender's shard; whether
    the sender's action bar in the chat was closed already."""
    closed = await conn.fetchval(
        "SELECT telesrv_send_sender_dialog(p_sender => $1, p_recipient => $2,"
        " p_sender_box => $3, p_date => $4)",
        p.sender,
        p.recipient,
        p.sender_box,
        p.date,
    )
    return None if closed is None else bool(closed)
