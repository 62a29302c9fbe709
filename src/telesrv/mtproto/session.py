"""One MTProto session on the server: the encrypted-message rules above the crypto.

Sans-io. A :class:`ServerSession` holds the state of one ``(auth_key_id, session_id)``
pair and outlives connections; the gateway keeps it in memory, feeds it decrypted
client messages and writes what it produces to whichever connection is current.
No clock and no randomness inside: ``now`` (unix seconds) is an argument and random
bytes come from the ``random_bytes`` callable.

Gateway usage::

    plaintext = crypto.decrypt_client_message(auth_key, body, allow_trailing=padded)
    session = sessions.get(peek_session_id(plaintext)) or ServerSession(...)
    for event in session.receive(plaintext, now):
        match event:
            case RpcRequest(msg_id, request): run it, then
                session.send_rpc_result(msg_id, result_bytes)   # or send_rpc_error
            case CancelRpc(req_msg_id): cancel that running request
            case DisconnectDelay(seconds): close the connection after that many seconds
                                           of silence (reset by the next one)
            case DestroySession(session_id): forget that session if it exists, then
                session.answer_destroy_session(session_id, existed)
    session.send_update(updates_bytes)        # server-initiated pushes
    for packet in session.flush(now):         # encrypted; give to transport.encode
        write(packet)
    session.on_reconnect()                    # same session on a new connection
    session.compact(now)                      # idle a while: give back what it
                                              # no longer needs (old msg_ids)

What :meth:`ServerSession.receive` enforces, the rules MTProto clients expect of a
server:

- The first message of the session queues ``new_session_created`` (its
  ``first_msg_id`` is the lowest msg_id in that packet, so a client never resends
  messages of the first container).
- msg_id: more than 300 s old -> ``bad_msg_notification`` 16, more than 30 s ahead
  -> 17, not divisible by 4 -> 18, older than the replay window -> 20. Duplicates
  are dropped (re-acknowledged, and a held answer to them is sent again).
- salt: the current or the previous period's derived salt (:mod:`.salts`), else
  ``bad_server_salt`` (48) with the current salt.
- seq_no parity, as lenient as Telegram wherever no information is lost: RPC
  queries and ``get_future_salts``/``rpc_drop_answer``/``destroy_session`` must be
  odd (else 35): a query without one is a client bug worth surfacing. ``msgs_ack``,
  ``ping``, ``http_wait``, ``msgs_state_req``, ``msg_resend_req`` and the
  informational messages are accepted with either parity, since real clients
  disagree (Pyrogram sends ``ping`` even, Telethon sends ``msgs_state_req`` even,
  mtcute sends ``msgs_ack`` odd); an odd one is acknowledged. A container is
  accepted with either parity (its items carry their own) and never acknowledged;
  code 34 (even expected) is never sent.
- Containers: items get the msg_id checks; a nested container or an undecodable
  one -> 64. ``gzip_packed`` bodies are unpacked, one level only (packed data
  holding another ``gzip_packed`` is refused) and within one budget per message
  (:class:`~telesrv.tl.core.UnpackBudget`, shared by all container items);
  bytes after the packed object are refused too.
- Every message the client sent with an odd seq_no is acknowledged by one
  ``msgs_ack`` in the next flush.

Outgoing messages get msg_ids (1 mod 4 for answers, 3 mod 4 for pushes) and
seq_nos at :meth:`ServerSession.flush`; several go into one ``msg_container``
(at most 1000 items / 1 MiB each), pushed updates never in one with answers
(service answers included).
RPC answers and updates are held until the client acknowledges them (at most 512
messages / 4 MiB, oldest forgotten first; the owner may drop more, told through
``on_held_change``, to keep budgets across sessions) and are sent again by
``msg_resend_req`` or :meth:`ServerSession.on_reconnect`, with their original
msg_id and seq_no (a fresh pair once the original id is older than clients
accept). One sent again ``MAX_RESENDS`` times and still unacknowledged is dropped
at the next reconnect, with one warning per reconnect naming the constructors. A request whose
answer was forgotten unacknowledged (that way or by the budgets) and that the client
asks for again (same msg_id, ``msg_resend_ans_req``) gets ``rpc_error`` 500
``RPC_CALL_FAIL``, so that it retries rather than waits. Small service
answers (pong, notifications, acks) are not held.
``pong``, ``future_salts``, ``msgs_state_info`` and ``destroy_session_ok/none`` are
sent bare, as clients expect; ``rpc_drop_answer`` is answered in ``rpc_result``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from telesrv.mtproto import crypto
from telesrv.mtproto.held_messages import FLAG_ANSWER_LOST, HeldMessages, OutMessage
from telesrv.mtproto.msgid import (
    MAX_PAST_SECONDS,
    MSG_TOO_OLD,
    SeenMsgIds,
    ServerMsgIds,
    check_client_msg_id,
    msg_id_for_time,
)
from telesrv.mtproto.salts import salt_for, salt_period
from telesrv.mtproto.service_messages import (
    ANSWERED_AT_ONCE,
    ANY_PARITY,
    FLAG_ACKED,
    FLAG_ANSWERED,
    FLAG_NO_ACK_NEEDED,
    FLAG_RPC_STARTED,
    MSGS_ACK,
    SERVICE_HANDLERS,
    VECTOR_ID,
    handle_query,
)
from telesrv.mtproto.session_events import (
    Event,
    SessionError,
)
from telesrv.tl import DecodeError, TLObject, UnpackBudget, mt
from telesrv.tl.core import GZIP_PACKED_ID, MSG_CONTAINER_ID
from telesrv.tl.service import (
    ContainerItem,
    decode_container,
    encode_rpc_error,
    encode_rpc_result,
    unwrap_gzip,
)

log = logging.getLogger(__name__)

__all__ = [
    "ServerSession",
    "peek_session_id",
]

# bad_msg_notification codes beyond the msg_id ones in .msgid
SEQNO_EXPECTED_ODD = 35
BAD_SERVER_SALT = 48
INVALID_CONTAINER = 64

MAX_CONTAINER_ITEMS = 1000
MAX_PACKET_BYTES = 1 << 20
MAX_ACK_IDS = 8192
# A resent message keeps its msg_id only while clients still accept its age (300 s).
RESEND_KEEP_ID_SECONDS = 240

_HEADER = struct.Struct("<qqqii")  # salt, session_id, msg_id, seq_no, length
_HEADER_SIZE = _HEADER.size
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_ITEM_HEAD = struct.Struct("<qii")
_CONTAINER_HEAD = struct.Struct("<Ii")
_ACK_HEAD = struct.Struct("<III")  # msgs_ack, vector, count
# What flush keeps apart: answers (every response) and pushed updates; acks and
# new_session_created go with either.
_NEUTRAL, _ANSWER, _PUSH = 0, 1, 2


def peek_session_id(plaintext: bytes) -> int:
    """The session_id in the header of a decrypted client message."""
    if len(plaintext) < _HEADER_SIZE:
        raise SessionError("plaintext shorter than a message header")
    return int(_I64.unpack_from(plaintext, 8)[0])


class ServerSession(HeldMessages):
    """State of one MTProto session (see the module docstring for the rules)."""

    def __init__(
        self,
        auth_key: bytes,
        auth_key_id: int,
        session_id: int,
        salt_secret: bytes,
        random_bytes: Callable[[int], bytes],
        *,
        replay_window: int = 1024,
        max_held_messages: int = 512,
        max_held_bytes: int = 4 << 20,
    ) -> None:
        self.auth_key = auth_key
        self.auth_key_id = auth_key_id
        self.session_id = session_id
        self._salt_secret = salt_secret
        self._random_bytes = random_bytes
        self._max_held_messages = max_held_messages
        self._max_held_bytes = max_held_bytes

        self._started = False
        self._msg_ids = ServerMsgIds()
        self._seen = SeenMsgIds(replay_window)
        self._content_sent = 0  # n in seq_no = 2n(+1)
        self._salt_cache_period: int | None = None
        self._salt_current = 0
        self._salt_previous = 0

        self._pending_acks: list[int] = []
        self._queue: list[OutMessage] = []
        self._queued_answers: dict[int, OutMessage] = {}  # req_msg_id -> answer not yet flushed
        self._running: set[int] = set()  # req msg_ids handed to the gateway, unanswered
        self._held: dict[int, OutMessage] = {}  # msg_id -> sent, unacknowledged; oldest first
        self._held_bytes = 0
        self._held_answers: dict[int, int] = {}  # req_msg_id -> msg_id of its held answer
        self._resend: dict[int, None] = {}  # held msg_ids to send again (ordered set)
        # Told the change in held bytes (HELD_OVERHEAD included), so that the owner
        # can bound what all sessions of a key or a process hold together.
        self.on_held_change: Callable[[int], None] | None = None
        # The layer the client's requests are served at, as the owner last learned it
        # (from invokeWithLayer); named in the log of a request that cannot be decoded.
        self.layer: int | None = None

    # -- incoming -----------------------------------------------------------------

    def receive(self, plaintext: bytes, now: float) -> list[Event]:
        """Process one decrypted client message (header + body, no padding).

        Service answers are queued for :meth:`flush`; what the gateway must act on
        is returned as events, in order.
        """
        if len(plaintext) < _HEADER_SIZE:
            raise SessionError("plaintext shorter than a message header")
        salt, session_id, msg_id, seq_no, length = _HEADER.unpack_from(plaintext, 0)
        if session_id != self.session_id:
            raise SessionError("message belongs to another session")
        if length != len(plaintext) - _HEADER_SIZE:
            raise SessionError("message length does not match the plaintext")
        events: list[Event] = []
        if length < 4:
            return events  # no constructor: nothing to answer

        items: list[ContainerItem] | None = None
        container_ok = True
        is_container = _U32.unpack_from(plaintext, _HEADER_SIZE)[0] == MSG_CONTAINER_ID
        if is_container:
            try:
                items = decode_container(plaintext[_HEADER_SIZE:])
            except DecodeError:
                container_ok = False

        if not self._started:
            self._started = True
            first = min(msg_id, *(item.msg_id for item in items)) if items else msg_id
            self._queue_new_session_created(first, now)

        code = check_client_msg_id(msg_id, now)
        if code is not None:
            self._queue_bad_msg(msg_id, seq_no, code)
            return events
        if msg_id in self._seen:
            self._on_duplicate(msg_id, plaintext[_HEADER_SIZE:])
            for item in items or ():
                if item.msg_id in self._seen:
                    self._on_duplicate(item.msg_id, item.body)
            return events
        if self._seen.is_too_old(msg_id):
            self._queue_bad_msg(msg_id, seq_no, MSG_TOO_OLD)
            return events
        if not self._salt_ok(salt, now):
            self._queue_service(
                mt.BadServerSalt(
                    bad_msg_id=msg_id,
                    bad_msg_seqno=seq_no,
                    error_code=BAD_SERVER_SALT,
                    new_server_salt=self._salt_current,
                ).to_bytes(),
                response=True,
            )
            return events

        # One budget for everything gzip_packed expands to in this message.
        budget = UnpackBudget()
        if not is_container:
            self._handle(msg_id, seq_no, plaintext[_HEADER_SIZE:], now, events, budget)
            return events
        # A container's own seq_no says nothing (its items carry theirs), so an odd
        # one is accepted like an even one; it is never acknowledged itself.
        if not container_ok or items is None:
            self._queue_bad_msg(msg_id, seq_no, INVALID_CONTAINER)
            return events
        self._seen.add(msg_id, FLAG_NO_ACK_NEEDED)
        for item in items:
            budget.unpacking = False
            self._receive_item(item, now, events, budget)
        return events

    def _receive_item(
        self, item: ContainerItem, now: float, events: list[Event], budget: UnpackBudget
    ) -> None:
        msg_id = item.msg_id
        code = check_client_msg_id(msg_id, now)
        if code is not None:
            self._queue_bad_msg(msg_id, item.seq_no, code)
        elif msg_id in self._seen:
            self._on_duplicate(msg_id, item.body)
        elif self._seen.is_too_old(msg_id):
            self._queue_bad_msg(msg_id, item.seq_no, MSG_TOO_OLD)
        else:
            self._handle(msg_id, item.seq_no, item.body, now, events, budget, in_container=True)

    def _handle(
        self,
        msg_id: int,
        seq_no: int,
        body: bytes,
        now: float,
        events: list[Event],
        budget: UnpackBudget,
        *,
        in_container: bool = False,
    ) -> None:
        """One message that passed the msg_id and salt checks."""
        content = bool(seq_no & 1)
        cid = _U32.unpack_from(body, 0)[0]
        if cid == GZIP_PACKED_ID:
            try:
                body = unwrap_gzip(body, budget)
                if len(body) < 4:
                    raise DecodeError("empty gzip_packed")
            except DecodeError:
                if content:
                    self._accept(msg_id, content)
                    self._constructor_invalid(msg_id, cid, "bad gzip_packed")
                return
            cid = _U32.unpack_from(body, 0)[0]
            budget.unpacking = True  # whatever these bytes hold may not be packed again

        if cid == MSG_CONTAINER_ID:
            # Top-level containers never get here; this one is nested or gzipped.
            self._queue_bad_msg(msg_id, seq_no, INVALID_CONTAINER)
            return
        if not content and cid not in ANY_PARITY:
            self._queue_bad_msg(msg_id, seq_no, SEQNO_EXPECTED_ODD)
            return
        self._accept(msg_id, content)
        handler = SERVICE_HANDLERS.get(cid)
        if handler is not None:
            handler(self, msg_id, body, now, events)
        else:
            handle_query(self, msg_id, body, now, events, budget)

    def _accept(self, msg_id: int, content: bool) -> None:
        if content:
            self._seen.add(msg_id)
            self._pending_acks.append(msg_id)
        else:
            self._seen.add(msg_id, FLAG_NO_ACK_NEEDED)

    def answered_instead_of_ack(self, msg_id: int) -> None:
        """``msg_id``, just accepted, is answered at once, and the answer acknowledges it."""
        acks = self._pending_acks
        if acks and acks[-1] == msg_id:  # content-related: its ack was the last queued
            acks.pop()
            self._seen.set_flags(msg_id, FLAG_ACKED)

    def _on_duplicate(self, msg_id: int, body: bytes) -> None:
        if len(body) >= 4 and _U32.unpack_from(body, 0)[0] in ANSWERED_AT_ONCE:
            # Its answer was its acknowledgement, and a replay is not answered again; a
            # bare ack would be what mtcute takes for a fault.
            return
        flags = self._seen.flags(msg_id) or 0
        if not flags & FLAG_NO_ACK_NEEDED:
            self._pending_acks.append(msg_id)  # the client probably missed our ack
        out_id = self._held_answers.get(msg_id)
        if out_id is not None:
            self._resend[out_id] = None
        elif flags & FLAG_ANSWER_LOST:
            self._answer_lost(msg_id)

    def _answer_lost(self, req_msg_id: int) -> None:
        # The answer was forgotten unacknowledged; the request itself is not kept, so
        # the client is told to retry (it does, under a new msg_id) rather than left
        # waiting. Not held: if it is lost too, asking again gets it again.
        self._queue_rpc_error(req_msg_id, 500, "RPC_CALL_FAIL")

    def _salt_ok(self, salt: int, now: float) -> bool:
        self._refresh_salts(now)
        return salt == self._salt_current or salt == self._salt_previous

    def _refresh_salts(self, now: float) -> None:
        period = salt_period(now)
        if period != self._salt_cache_period:
            if self._salt_cache_period == period - 1:
                self._salt_previous = self._salt_current
            else:
                self._salt_previous = salt_for(self._salt_secret, self.auth_key_id, period - 1)
            self._salt_current = salt_for(self._salt_secret, self.auth_key_id, period)
            self._salt_cache_period = period

    def compact(self, now: float) -> None:
        """Give back what an idle session no longer needs: the received msg_ids older
        than a client may send (refused by age in any case, code 16; msgs_state_req
        says unknown of them either way), up to 1024 of them, and the room of tables
        emptied since they last grew (a dict or set keeps its size when emptied)."""
        self._seen.forget_up_to(msg_id_for_time(now - MAX_PAST_SECONDS))
        if not self._held:
            self._held = {}
        if not self._held_answers:
            self._held_answers = {}
        if not self._queued_answers:
            self._queued_answers = {}
        if not self._resend:
            self._resend = {}
        if not self._running:
            self._running = set()

    # -- outgoing -----------------------------------------------------------------

    def send_rpc_result(self, req_msg_id: int, result: bytes) -> bool:
        """Queue ``rpc_result`` for a request (``result`` is the serialized result).

        Returns False, queuing nothing, when the request is not running (it was
        dropped by the client with rpc_drop_answer, or already answered).
        """
        return self._queue_answer(req_msg_id, encode_rpc_result(req_msg_id, result))

    def send_rpc_error(self, req_msg_id: int, code: int, message: str) -> bool:
        """Queue ``rpc_result`` with ``rpc_error``; same return value as send_rpc_result."""
        return self._queue_answer(req_msg_id, encode_rpc_error(req_msg_id, code, message))

    def send_update(self, body: bytes) -> None:
        """Queue a server-initiated content message (``updates`` etc.); held until acked."""
        self._queue.append(OutMessage(body, True, False, None, True))

    def answer_destroy_session(self, session_id: int, destroyed: bool) -> None:
        """Answer a :class:`DestroySession` event: ok when the session existed."""
        answer: TLObject
        if destroyed:
            answer = mt.DestroySessionOk(session_id=session_id)
        else:
            answer = mt.DestroySessionNone(session_id=session_id)
        self._queue_service(answer.to_bytes(), response=True)

    def on_reconnect(self) -> None:
        """The session continues on a new connection: send every held message again
        (but the ones that keep coming back unacknowledged, see MAX_RESENDS)."""
        for out_id in self._held_to_resend():
            self._resend[out_id] = None

    @property
    def running_requests(self) -> frozenset[int]:
        """msg_ids of requests handed out as RpcRequest and not answered or dropped."""
        return frozenset(self._running)

    @property
    def only_acks_queued(self) -> bool:
        """Acks are all a flush would send now (nothing else queued or to resend)."""
        return bool(self._pending_acks) and not self._queue and not self._resend

    @property
    def acks_queued(self) -> bool:
        return bool(self._pending_acks)

    def current_salt(self, now: float) -> int:
        self._refresh_salts(now)
        return self._salt_current

    def flush(self, now: float) -> list[bytes]:
        """Everything queued, as encrypted packets (auth_key_id + msg_key + data).

        An answer (``rpc_result``, or a service answer such as ``pong``,
        ``bad_msg_notification`` or ``bad_server_salt``) never shares a packet with a
        pushed update: a client that cannot parse the update would lose the answer with
        it (and, resent on every reconnect, loop on it; or, losing a salt correction,
        wait on its request). Acks and ``new_session_created`` go with either. Messages
        keep their queue order, and a run of one kind is packed (its container numbered)
        before the next run is numbered, so packets leave in msg_id order.
        """
        packets: list[bytes] = []
        run: list[tuple[int, int, bytes]] = []  # (msg_id, seq_no, body)
        run_kind = _NEUTRAL
        run_resent = 0  # resent messages lead their run (see _pack)
        any_response = False
        renew: list[OutMessage] = []
        if self._resend:
            keep_after = msg_id_for_time(now - RESEND_KEEP_ID_SECONDS)
            pushes: list[tuple[int, int, bytes]] = []
            for out_id in self._resend:
                out = self._held.get(out_id)
                if out is None:
                    continue  # acknowledged or dropped meanwhile
                out.resends += 1
                if out_id >= keep_after:
                    if out.req_msg_id is None:
                        pushes.append((out_id, out.seq_no, out.body))
                    else:
                        run.append((out_id, out.seq_no, out.body))
                        run_kind = _ANSWER
                else:
                    self._unhold(out_id)
                    renew.append(out)
            self._resend.clear()
            if pushes:
                if run:
                    packets += self._pack(run, len(run), True, now)
                run, run_kind = pushes, _PUSH
            run_resent = len(run)

        if self._pending_acks:
            acks = self._pending_acks
            self._pending_acks = []
            for start in range(0, len(acks), MAX_ACK_IDS):
                chunk = acks[start : start + MAX_ACK_IDS]
                body = _ACK_HEAD.pack(MSGS_ACK, VECTOR_ID, len(chunk)) + struct.pack(
                    f"<{len(chunk)}q", *chunk
                )
                run.append((self._msg_ids.next(now, response=True), 2 * self._content_sent, body))
                for acked in chunk:
                    self._seen.set_flags(acked, FLAG_ACKED)
            any_response = True

        queue = renew + self._queue if renew else self._queue
        self._queue = []
        for out in queue:
            if out.dropped:
                continue
            if out.hold and out.req_msg_id is None:
                kind = _PUSH
            elif out.response:
                kind = _ANSWER
            else:
                kind = _NEUTRAL
            if kind != run_kind and kind != _NEUTRAL:
                if run_kind != _NEUTRAL and run:
                    packets += self._pack(run, run_resent, any_response, now)
                    run, run_resent, any_response = [], 0, False
                run_kind = kind
            out.msg_id = self._msg_ids.next(now, response=out.response)
            if out.content:
                out.seq_no = 2 * self._content_sent + 1
                self._content_sent += 1
            else:
                out.seq_no = 2 * self._content_sent
            if out.req_msg_id is not None:
                self._queued_answers.pop(out.req_msg_id, None)
            if out.hold:
                self._hold(out)
            any_response = any_response or out.response
            run.append((out.msg_id, out.seq_no, out.body))
        if run:
            packets += self._pack(run, run_resent, any_response, now)
        return packets

    def _pack(
        self, batch: list[tuple[int, int, bytes]], fresh_from: int, response: bool, now: float
    ) -> list[bytes]:
        self._refresh_salts(now)
        packets = []
        start = 0
        total = len(batch)
        while start < total:
            end = start
            size = 8  # container constructor + count
            while end < total and end - start < MAX_CONTAINER_ITEMS:
                item_size = 16 + len(batch[end][2])
                if end > start and size + item_size > MAX_PACKET_BYTES:
                    break
                size += item_size
                end += 1
            if end - start == 1 and start >= fresh_from:
                msg_id, seq_no, body = batch[start]
                plaintext = (
                    _HEADER.pack(self._salt_current, self.session_id, msg_id, seq_no, len(body))
                    + body
                )
            else:
                # Resent messages always travel in a container, which gets a fresh
                # msg_id above theirs, as clients expect of containers.
                container_id = self._msg_ids.next(now, response=response)
                buf = bytearray(
                    _HEADER.pack(
                        self._salt_current,
                        self.session_id,
                        container_id,
                        2 * self._content_sent,
                        size,
                    )
                )
                buf += _CONTAINER_HEAD.pack(MSG_CONTAINER_ID, end - start)
                for msg_id, seq_no, body in batch[start:end]:
                    buf += _ITEM_HEAD.pack(msg_id, seq_no, len(body))
                    buf += body
                plaintext = bytes(buf)
            padding = self._random_bytes(crypto.padding_length(len(plaintext)))
            packets.append(crypto.encrypt_server_message(self.auth_key, plaintext, padding))
            start = end
        return packets

    # -- queue ----------------------------------------------------------------------

    def _queue_service(self, body: bytes, *, response: bool) -> None:
        """A content-related service message that is not held."""
        self._queue.append(OutMessage(body, True, response, None, False))

    def _queue_answer(self, req_msg_id: int, body: bytes) -> bool:
        if req_msg_id not in self._running:
            return False
        self._running.discard(req_msg_id)
        self._seen.set_flags(req_msg_id, FLAG_ANSWERED)
        out = OutMessage(body, True, True, req_msg_id, True)
        self._queued_answers[req_msg_id] = out
        self._queue.append(out)
        return True

    def _constructor_invalid(self, msg_id: int, cid: int, detail: str) -> None:
        # Every occurrence is logged: it is how a client on a layer (or a method) we do
        # not understand shows up, and the client itself usually just retries.
        log.warning(
            "INPUT_CONSTRUCTOR_INVALID: request %#010x at layer %s from auth key %016x: %s",
            cid,
            self.layer if self.layer is not None else "unknown",
            self.auth_key_id & 0xFFFFFFFFFFFFFFFF,
            detail,
        )
        self._queue_rpc_error(msg_id, 400, "INPUT_CONSTRUCTOR_INVALID")

    def _queue_rpc_error(self, req_msg_id: int, code: int, message: str) -> None:
        self._seen.set_flags(req_msg_id, FLAG_RPC_STARTED | FLAG_ANSWERED)
        self._queue_service(encode_rpc_error(req_msg_id, code, message), response=True)

    def _queue_bad_msg(self, msg_id: int, seq_no: int, code: int) -> None:
        self._queue_service(
            mt.BadMsgNotification(
                bad_msg_id=msg_id, bad_msg_seqno=seq_no, error_code=code
            ).to_bytes(),
            response=True,
        )

    def _queue_pong(self, msg_id: int, body: bytes) -> None:
        ping_id = _I64.unpack_from(body, 4)[0]
        self._queue_service(mt.Pong(msg_id=msg_id, ping_id=ping_id).to_bytes(), response=True)

    def _queue_new_session_created(self, first_msg_id: int, now: float) -> None:
        self._refresh_salts(now)
        unique_id = int.from_bytes(self._random_bytes(8), "little", signed=True)
        body = mt.NewSessionCreated(
            first_msg_id=first_msg_id, unique_id=unique_id, server_salt=self._salt_current
        ).to_bytes()
        self._queue_service(body, response=False)
