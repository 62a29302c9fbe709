import hashlib
import logging
import struct
import time
from collections import defaultdict
from typing import Any

import pytest
from telethon.crypto import AuthKey
from telethon.network.mtprotostate import MTProtoState
from telethon.tl import functions as tfunctions
from telethon.tl import types as ttypes
from telethon.tl.core import MessageContainer

from telesrv.mtproto import crypto, salts
from telesrv.mtproto.session import ServerSession, peek_session_id
from telesrv.mtproto.session_events import (
    CancelRpc,
    DestroySession,
    DisconnectDelay,
    RpcRequest,
    SessionError,
)
from telesrv.tl import decode, functions, mt, types
from telesrv.tl.core import MAX_GZIP_OUTPUT, MSG_CONTAINER_ID
from telesrv.tl.service import (
    ContainerItem,
    constructor_id,
    encode_container,
    encode_rpc_error,
    gzip_packed,
)

AUTH_KEY = b"".join(hashlib.sha256(b"telesrv test auth key %d" % i).digest() for i in range(8))
AUTH_KEY_ID = crypto.auth_key_id(AUTH_KEY)
SECRET = b"telesrv test salt secret"
SESSION_ID = 0x1112131415161718
NOW = 1_700_000_000.0
BASE = 0x6553F10000000000  # NOW * 2**32
SALT = salts.current_salt(SECRET, AUTH_KEY_ID, NOW)

RPC_RESULT = 0xF35C6D01
RPC_ERROR = 0x2144CA19


def fake_random(n: int) -> bytes:
    return bytes((0x40 + i) & 0xFF for i in range(n))


def new_session(**kwargs: Any) -> ServerSession:
    return ServerSession(AUTH_KEY, AUTH_KEY_ID, SESSION_ID, SECRET, fake_random, **kwargs)


def cid(k: int, now: float = NOW) -> int:
    """The k-th client msg_id near ``now`` (divisible by 4)."""
    return (int(now * 2**32) & ~3) - 4 * 1000 + 4 * k


def plain(body: bytes, msg_id: int, seq_no: int, salt: int = SALT) -> bytes:
    return struct.pack("<qqqii", salt, SESSION_ID, msg_id, seq_no, len(body)) + body


def container(*items: tuple[int, int, bytes]) -> bytes:
    return encode_container([ContainerItem(m, s, b) for m, s, b in items])


def decrypt_server(packet: bytes) -> tuple[int, int, int, int, bytes]:
    """(salt, session_id, msg_id, seq_no, body) of one server packet."""
    assert packet[:8] == crypto.auth_key_id_bytes(AUTH_KEY)
    msg_key = packet[8:24]
    key, iv = crypto.message_aes_key_iv(AUTH_KEY, msg_key, from_client=False)
    data = crypto.aes_ige_decrypt(packet[24:], key, iv)
    assert crypto.message_key(AUTH_KEY, data, from_client=False) == msg_key
    salt, session_id, msg_id, seq_no, length = struct.unpack_from("<qqqii", data)
    assert 12 <= len(data) - 32 - length <= 1024
    return salt, session_id, msg_id, seq_no, data[32 : 32 + length]


def unpack(packets: list[bytes]) -> list[tuple[int, int, bytes]]:
    """Every message in the packets (containers opened) as (msg_id, seq_no, body)."""
    out = []
    for packet in packets:
        salt, session_id, msg_id, seq_no, body = decrypt_server(packet)
        assert salt == SALT and session_id == SESSION_ID
        if constructor_id(body) == MSG_CONTAINER_ID:
            out.extend(_items(body))
        else:
            out.append((msg_id, seq_no, body))
    return out


def _items(body: bytes) -> list[tuple[int, int, bytes]]:
    from telesrv.tl.service import decode_container

    return [(i.msg_id, i.seq_no, i.body) for i in decode_container(body)]


def objects(packets: list[bytes]) -> list[Any]:
    """Decoded bodies; rpc_result bodies as (req_msg_id, raw result bytes)."""
    out: list[Any] = []
    for _, _, body in unpack(packets):
        if constructor_id(body) == RPC_RESULT:
            out.append(("rpc_result", struct.unpack_from("<q", body, 4)[0], body[12:]))
        else:
            out.append(decode(body))
    return out


def started_session(**kwargs: Any) -> ServerSession:
    """A session past its first message, with the output of that flushed."""
    s = new_session(**kwargs)
    s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(0), 1), NOW)
    s.flush(NOW)
    return s


# -- ping, first message ------------------------------------------------------------


def test_ping_pong_exact_bytes() -> None:
    s = new_session()
    ping = mt.Ping(ping_id=0x1122334455667788).to_bytes()
    assert s.receive(plain(ping, cid(0), 1), NOW) == []
    packets = s.flush(NOW)
    assert len(packets) == 1
    _, _, msg_id, seq_no, body = decrypt_server(packets[0])
    assert (msg_id, seq_no) == (BASE | 0x9, 4)
    expected = [
        "dcf8f173 02000000",  # msg_container, 2 items; the pong acknowledges the ping
        # new_session_created(first_msg_id, unique_id=0x4746..40, server_salt) BASE|3, seq 1
        "0300000000f15365 01000000 1c000000",
        "0809c29e 60f0fffffff05365 4041424344454647 3d10353c1e8a2c92",
        # pong(msg_id=client msg, ping_id) BASE|5, seq 3
        "0500000000f15365 03000000 14000000",
        "c5737734 60f0fffffff05365 8877665544332211",
    ]
    assert body == bytes.fromhex(" ".join(expected))
    assert packets[0].hex() == (
        "9ecfd26a9c4801e36e991b4a7636306492de807ee2b3166d8f216664f6d0c861"
        "4580d0b577144063e8f706604d03e1380841862f57e1ff3916d99f35cea03d84"
        "cdc10d53b3492f8e4ab4765a7888d56999ac0c459a232ba1a0b2ba0275c8a4b1"
        "e749bf74afd047184214b8ec8e14bdc6e42de0f65ab5dd93632e82836fb5ed3a"
        "4ef5f029da14203809be8756adb4128db6d9fcdd518fd17cec180a5a6bd2563a"
        "702e4706c312356d"
    )


def test_new_session_created_only_once() -> None:
    s = new_session()
    s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(0), 1), NOW)
    first = objects(s.flush(NOW))
    s.receive(plain(mt.Ping(ping_id=2).to_bytes(), cid(1), 3), NOW)
    second = objects(s.flush(NOW))
    assert [type(o) for o in first] == [mt.NewSessionCreated, mt.Pong]
    assert first[0].first_msg_id == cid(0)
    assert first[0].server_salt == SALT
    assert second == [mt.Pong(msg_id=cid(1), ping_id=2)]


def test_new_session_first_msg_id_is_lowest_in_container() -> None:
    s = new_session()
    ping = mt.Ping(ping_id=1).to_bytes()
    s.receive(plain(container((cid(1), 1, ping), (cid(2), 3, ping)), cid(3), 4), NOW)
    created = [o for o in objects(s.flush(NOW)) if isinstance(o, mt.NewSessionCreated)]
    assert [o.first_msg_id for o in created] == [cid(1)]


def test_ping_delay_disconnect_event() -> None:
    s = started_session()
    body = mt.PingDelayDisconnect(ping_id=7, disconnect_delay=75).to_bytes()
    assert s.receive(plain(body, cid(1), 3), NOW) == [DisconnectDelay(75)]
    # The pong is its acknowledgement: mtcute warns of an ack ahead of the pong.
    assert objects(s.flush(NOW)) == [mt.Pong(msg_id=cid(1), ping_id=7)]


@pytest.mark.parametrize("seq_no", [3, 2])  # Pyrogram sends ping as not content-related
def test_ping_is_answered_not_acked(seq_no: int) -> None:
    s = started_session()
    s.receive(plain(mt.Ping(ping_id=5).to_bytes(), cid(1), seq_no), NOW)
    assert objects(s.flush(NOW)) == [mt.Pong(msg_id=cid(1), ping_id=5)]


def test_session_mismatch_and_peek() -> None:
    s = new_session()
    msg = plain(mt.Ping(ping_id=1).to_bytes(), cid(0), 1)
    assert peek_session_id(msg) == SESSION_ID
    other = msg[:8] + struct.pack("<q", 99) + msg[16:]
    with pytest.raises(SessionError):
        s.receive(other, NOW)
    with pytest.raises(SessionError):
        s.receive(msg[:20], NOW)
    with pytest.raises(SessionError):
        peek_session_id(msg[:20])
    with pytest.raises(SessionError):
        s.receive(msg + b"\0\0\0\0", NOW)  # length field disagrees


# -- requests -------------------------------------------------------------------------


def test_container_with_two_requests() -> None:
    s = started_session()
    get_config = functions.help.GetConfig().to_bytes()
    get_state = functions.updates.GetState().to_bytes()
    events = s.receive(
        plain(container((cid(1), 3, get_config), (cid(2), 5, get_state)), cid(3), 6), NOW
    )
    assert events == [
        RpcRequest(cid(1), functions.help.GetConfig()),
        RpcRequest(cid(2), functions.updates.GetState()),
    ]
    assert s.running_requests == {cid(1), cid(2)}
    assert s.send_rpc_result(cid(2), b"\x11\x22\x33\x44")
    assert s.send_rpc_error(cid(1), 500, "INTERNAL")
    assert s.running_requests == frozenset()
    msgs = unpack(s.flush(NOW))
    assert [m[1] for m in msgs] == [4, 5, 7]  # ack (seq 2n), then two content messages
    assert decode(msgs[0][2]) == mt.MsgsAck(msg_ids=[cid(1), cid(2)])
    assert msgs[1][2] == struct.pack("<Iq", RPC_RESULT, cid(2)) + b"\x11\x22\x33\x44"
    err = struct.pack("<IqIi", RPC_RESULT, cid(1), RPC_ERROR, 500) + b"\x08INTERNAL\0\0\0"
    assert msgs[2][2] == err
    assert all(m[0] % 4 == 1 for m in msgs)


def test_answers_only_for_running_requests() -> None:
    s = started_session()
    assert not s.send_rpc_result(cid(5), b"\0\0\0\0")  # never asked
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    assert s.send_rpc_result(cid(1), b"\0\0\0\0")
    assert not s.send_rpc_result(cid(1), b"\0\0\0\0")  # answered already
    results = [o for o in objects(s.flush(NOW)) if isinstance(o, tuple)]
    assert len(results) == 1


def test_gzip_packed_request() -> None:
    s = started_session()
    request = functions.help.GetConfig()
    events = s.receive(plain(gzip_packed(request.to_bytes()), cid(1), 3), NOW)
    assert events == [RpcRequest(cid(1), request)]


def test_gzip_packed_ping_in_container() -> None:
    s = started_session()
    body = gzip_packed(mt.Ping(ping_id=9).to_bytes())
    s.receive(plain(container((cid(1), 3, body)), cid(2), 4), NOW)
    assert objects(s.flush(NOW)) == [mt.Pong(msg_id=cid(1), ping_id=9)]


def rpc_errors(packets: list[bytes]) -> dict[int, str]:
    """req_msg_id -> rpc_error message of the rpc_results among ``packets``."""
    out = {}
    for o in objects(packets):
        if isinstance(o, tuple) and o[2][:4] == struct.pack("<I", RPC_ERROR):
            out[o[1]] = decode(o[2]).error_message  # type: ignore[attr-defined]
    return out


def test_gzip_packed_inside_gzip_packed_is_refused() -> None:
    s = started_session()
    request = functions.help.GetConfig().to_bytes()
    assert s.receive(plain(gzip_packed(gzip_packed(request)), cid(1), 3), NOW) == []
    # ... also where the packed request has a packed field
    wrapped = functions.InvokeWithoutUpdates(query=functions.help.GetConfig()).to_bytes()
    nested = wrapped[:4] + gzip_packed(request)
    assert s.receive(plain(gzip_packed(nested), cid(2), 5), NOW) == []
    # One level inside a field is what TDLib-style wrappers send: accepted.
    assert s.receive(plain(nested, cid(3), 7), NOW) == [
        RpcRequest(cid(3), functions.InvokeWithoutUpdates(query=functions.help.GetConfig()))
    ]
    assert rpc_errors(s.flush(NOW)) == {
        cid(1): "INPUT_CONSTRUCTOR_INVALID",
        cid(2): "INPUT_CONSTRUCTOR_INVALID",
    }


def test_padding_after_a_gzip_packed_request_is_refused() -> None:
    s = started_session()
    request = functions.help.GetConfig().to_bytes()
    assert s.receive(plain(gzip_packed(request + b"\0" * 64), cid(1), 3), NOW) == []
    assert s.receive(plain(gzip_packed(request) + b"\0" * 8, cid(2), 5), NOW) == []
    assert rpc_errors(s.flush(NOW)).keys() == {cid(1), cid(2)}


def test_gzip_budget_is_shared_by_a_container() -> None:
    # Each item alone expands within the per-message budget; together they do not.
    s = started_session()
    payload = functions.messages.SendMessage(
        peer=types.InputPeerSelf(), message="x" * (MAX_GZIP_OUTPUT // 3), random_id=1
    ).to_bytes()
    packed = gzip_packed(payload)
    two = container((cid(1), 3, packed), (cid(2), 5, packed))
    events = s.receive(plain(two, cid(3), 6), NOW)
    assert [e.msg_id for e in events if isinstance(e, RpcRequest)] == [cid(1), cid(2)]
    three = container((cid(4), 7, packed), (cid(5), 9, packed), (cid(6), 11, packed))
    events = s.receive(plain(three, cid(7), 12), NOW)
    assert [e.msg_id for e in events if isinstance(e, RpcRequest)] == [cid(4), cid(5)]
    assert rpc_errors(s.flush(NOW)) == {cid(6): "INPUT_CONSTRUCTOR_INVALID"}


def test_undecodable_request_gets_rpc_error() -> None:
    s = started_session()
    assert s.receive(plain(b"\xde\xad\xbe\xef", cid(1), 3), NOW) == []
    assert s.receive(plain(gzip_packed(b"\x01\x02\x03\x04")[:12], cid(2), 5), NOW) == []
    errors = [o for o in objects(s.flush(NOW)) if isinstance(o, tuple)]
    expected = b"\x19\xca\x44\x21\x90\x01\x00\x00\x19INPUT_CONSTRUCTOR_INVALID\0\0"
    assert errors == [("rpc_result", cid(1), expected), ("rpc_result", cid(2), expected)]


def test_every_input_constructor_invalid_is_logged_with_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = started_session()
    caplog.set_level(logging.WARNING, logger="telesrv.mtproto.session")
    for k in (1, 2):  # every occurrence, not once
        s.receive(plain(b"\xde\xad\xbe\xef", cid(k), 2 * k + 1), NOW)
    s.layer = 198  # as the gateway sets it once the client declared its layer
    s.receive(plain(b"\xde\xad\xbe\xef", cid(3), 7), NOW)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 3
    assert all("INPUT_CONSTRUCTOR_INVALID" in m and "0xefbeadde" in m for m in lines)
    assert ["at layer unknown" in m for m in lines] == [True, True, False]
    assert "at layer 198" in lines[2]


def test_truncated_request_gets_rpc_error() -> None:
    s = started_session()
    body = functions.messages.GetHistory(
        peer=types.InputPeerSelf(),
        offset_id=0,
        offset_date=0,
        add_offset=0,
        limit=1,
        max_id=0,
        min_id=0,
        hash=0,
    ).to_bytes()
    assert s.receive(plain(body[:-4], cid(1), 3), NOW) == []
    assert [o[1] for o in objects(s.flush(NOW)) if isinstance(o, tuple)] == [cid(1)]


# -- msg_id, salt and seq_no checks -----------------------------------------------------


@pytest.mark.parametrize(
    ("msg_id", "code"),
    [
        (BASE - (301 << 32), 16),
        (BASE + (31 << 32), 17),
        (BASE + 1, 18),
    ],
)
def test_bad_msg_id(msg_id: int, code: int) -> None:
    s = started_session()
    assert s.receive(plain(functions.help.GetConfig().to_bytes(), msg_id, 3), NOW) == []
    assert objects(s.flush(NOW)) == [
        mt.BadMsgNotification(bad_msg_id=msg_id, bad_msg_seqno=3, error_code=code)
    ]


def test_bad_msg_id_inside_container() -> None:
    s = started_session()
    old = BASE - (400 << 32)
    ping = mt.Ping(ping_id=3).to_bytes()
    s.receive(plain(container((old, 3, ping), (cid(2), 5, ping)), cid(3), 6), NOW)
    assert objects(s.flush(NOW)) == [
        mt.BadMsgNotification(bad_msg_id=old, bad_msg_seqno=3, error_code=16),
        mt.Pong(msg_id=cid(2), ping_id=3),
    ]


def test_message_below_replay_window_is_too_old() -> None:
    s = started_session(replay_window=4)
    for k in range(2, 8):
        s.receive(plain(mt.Ping(ping_id=k).to_bytes(), cid(k), 2 * k + 1), NOW)
    s.flush(NOW)
    assert s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(1), 3), NOW) == []
    assert objects(s.flush(NOW)) == [
        mt.BadMsgNotification(bad_msg_id=cid(1), bad_msg_seqno=3, error_code=20)
    ]


def test_duplicate_is_dropped_and_reacknowledged() -> None:
    s = started_session()
    msg = plain(functions.help.GetConfig().to_bytes(), cid(1), 3)
    assert len(s.receive(msg, NOW)) == 1
    assert s.receive(msg, NOW) == []
    assert objects(s.flush(NOW)) == [mt.MsgsAck(msg_ids=[cid(1), cid(1)])]


def test_msgs_state_req_is_answered_not_acked_and_a_duplicate_gets_nothing() -> None:
    s = started_session()
    msg = plain(mt.MsgsStateReq(msg_ids=[cid(0)]).to_bytes(), cid(1), 3)
    assert s.receive(msg, NOW) == []
    [info] = objects(s.flush(NOW))
    assert isinstance(info, mt.MsgsStateInfo) and info.req_msg_id == cid(1)
    assert s.receive(msg, NOW) == []
    assert s.flush(NOW) == []


@pytest.mark.parametrize("in_container", [False, True])
def test_duplicate_ping_gets_neither_pong_nor_ack(in_container: bool) -> None:
    s = started_session()
    ping = mt.PingDelayDisconnect(ping_id=4, disconnect_delay=75).to_bytes()
    msg = plain(container((cid(1), 3, ping)), cid(2), 4) if in_container else plain(ping, cid(1), 3)
    assert s.receive(msg, NOW) == [DisconnectDelay(75)]
    assert objects(s.flush(NOW)) == [mt.Pong(msg_id=cid(1), ping_id=4)]
    assert s.receive(msg, NOW) == []
    assert s.flush(NOW) == []


def test_duplicate_resends_held_answer() -> None:
    s = started_session()
    msg = plain(functions.help.GetConfig().to_bytes(), cid(1), 3)
    s.receive(msg, NOW)
    s.send_rpc_result(cid(1), b"\x01\0\0\0")
    answer = [m for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == RPC_RESULT]
    assert s.receive(msg, NOW + 1) == []
    packets = s.flush(NOW + 1)
    assert len(packets) == 1
    _, _, container_id, _, body = decrypt_server(packets[0])
    assert constructor_id(body) == MSG_CONTAINER_ID  # resent messages travel in a container
    assert container_id > answer[0][0]
    resent = [m for m in _items(body) if constructor_id(m[2]) == RPC_RESULT]
    assert resent == answer


def test_duplicate_container_resends_held_answers_of_its_items() -> None:
    s = started_session()
    packet = plain(container((cid(1), 3, functions.help.GetConfig().to_bytes())), cid(2), 4)
    s.receive(packet, NOW)
    s.send_rpc_result(cid(1), b"\x01\0\0\0")
    (answer,) = [m for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == RPC_RESULT]
    assert s.receive(packet, NOW) == []
    msgs = unpack(s.flush(NOW))
    assert answer in msgs
    assert decode(msgs[-1][2]) == mt.MsgsAck(msg_ids=[cid(1)])


def test_bad_server_salt_then_success() -> None:
    s = new_session()
    body = functions.help.GetConfig().to_bytes()
    assert s.receive(plain(body, cid(0), 1, salt=12345), NOW) == []
    assert objects(s.flush(NOW)) == [
        mt.NewSessionCreated(first_msg_id=cid(0), unique_id=0x4746454443424140, server_salt=SALT),
        mt.BadServerSalt(bad_msg_id=cid(0), bad_msg_seqno=1, error_code=48, new_server_salt=SALT),
    ]
    # The rejected message was not recorded: the same msg_id with the right salt works.
    assert s.receive(plain(body, cid(0), 1), NOW) == [
        RpcRequest(cid(0), functions.help.GetConfig())
    ]


def test_bad_salt_on_container_names_the_container() -> None:
    s = started_session()
    ping = mt.Ping(ping_id=1).to_bytes()
    s.receive(plain(container((cid(1), 3, ping)), cid(2), 4, salt=SALT + 1), NOW)
    (notice,) = objects(s.flush(NOW))
    assert isinstance(notice, mt.BadServerSalt)
    assert notice.bad_msg_id == cid(2)


def test_previous_period_salt_accepted_older_rejected() -> None:
    period = salts.salt_period(NOW)
    previous = salts.salt_for(SECRET, AUTH_KEY_ID, period - 1)
    older = salts.salt_for(SECRET, AUTH_KEY_ID, period - 2)
    s = started_session()
    ping = mt.Ping(ping_id=1).to_bytes()
    s.receive(plain(ping, cid(1), 3, salt=previous), NOW)
    s.receive(plain(ping, cid(2), 5, salt=older), NOW)
    found = objects(s.flush(NOW))
    assert mt.Pong(msg_id=cid(1), ping_id=1) in found
    assert [o.bad_msg_id for o in found if isinstance(o, mt.BadServerSalt)] == [cid(2)]


def test_salt_follows_the_clock() -> None:
    s = started_session()
    later = NOW + 2 * salts.SALT_PERIOD
    s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(0, later), 3), later)
    (notice,) = [m for m in unpack_any_salt(s.flush(later)) if isinstance(m, mt.BadServerSalt)]
    assert notice.new_server_salt == salts.current_salt(SECRET, AUTH_KEY_ID, later)
    assert s.current_salt(later) == notice.new_server_salt


def unpack_any_salt(packets: list[bytes]) -> list[Any]:
    return [decode(decrypt_server(p)[4]) for p in packets]


@pytest.mark.parametrize(
    ("body", "seq_no"),
    [
        (functions.help.GetConfig().to_bytes(), 2),  # a query must be content-related
        (mt.GetFutureSalts(num=1).to_bytes(), 4),
        (mt.DestroySession(session_id=1).to_bytes(), 6),
        (mt.RpcDropAnswer(req_msg_id=1).to_bytes(), 8),
    ],
)
def test_seq_no_parity(body: bytes, seq_no: int) -> None:
    s = started_session()
    assert s.receive(plain(body, cid(1), seq_no), NOW) == []
    assert objects(s.flush(NOW)) == [
        mt.BadMsgNotification(bad_msg_id=cid(1), bad_msg_seqno=seq_no, error_code=35)
    ]


def test_odd_msgs_ack_is_accepted_and_acknowledged_exact_bytes() -> None:
    # mtcute numbers its msgs_ack as content-related; Telegram takes it, so do we:
    # the ack is applied and, being content-related, acknowledged in turn.
    s = started_session()
    answer_id = answered(s, 1)
    assert s.held_count == 1
    ack = bytes.fromhex("59b4d662 15c4b51c 01000000") + struct.pack("<q", answer_id)
    assert ack == mt.MsgsAck(msg_ids=[answer_id]).to_bytes()
    assert s.receive(plain(ack, cid(2), 5), NOW) == []
    assert s.held_count == 0
    packets = s.flush(NOW)
    assert len(packets) == 1
    _, _, _, seq_no, body = decrypt_server(packets[0])
    # msgs_ack([cid(2)]), bare, not content-related
    assert body == bytes.fromhex("59b4d662 15c4b51c 01000000") + struct.pack("<q", cid(2))
    assert seq_no % 2 == 0
    s.on_reconnect()
    assert s.flush(NOW) == []  # nothing held: the odd ack counted


def test_even_msgs_ack_is_not_acknowledged() -> None:
    s = started_session()
    answer_id = answered(s, 1)
    s.receive(plain(mt.MsgsAck(msg_ids=[answer_id]).to_bytes(), cid(2), 4), NOW)
    assert s.held_count == 0
    assert s.flush(NOW) == []


@pytest.mark.parametrize(
    ("body", "acked_when_odd"),
    [
        (mt.Ping(ping_id=7).to_bytes(), False),  # its pong acknowledges it
        (mt.MsgsStateReq(msg_ids=[1]).to_bytes(), False),  # its msgs_state_info does
        (mt.MsgResendReq(msg_ids=[1]).to_bytes(), True),
        (mt.HttpWait(max_delay=0, wait_after=0, max_wait=0).to_bytes(), True),
        (mt.MsgsAck(msg_ids=[1]).to_bytes(), True),
    ],
)
@pytest.mark.parametrize("seq_no", [2, 3])
def test_service_messages_take_either_parity(
    body: bytes, acked_when_odd: bool, seq_no: int
) -> None:
    s = started_session()
    s.receive(plain(body, cid(1), seq_no), NOW)
    found = objects(s.flush(NOW))
    assert not any(isinstance(o, mt.BadMsgNotification) for o in found), found
    assert (mt.MsgsAck(msg_ids=[cid(1)]) in found) == (acked_when_odd and bool(seq_no & 1))


def test_container_with_odd_seq_no_is_accepted() -> None:
    # The container's own parity carries nothing; its items are handled as usual
    # and the container itself is not acknowledged.
    s = started_session()
    ping = mt.Ping(ping_id=1).to_bytes()
    wait = mt.HttpWait(max_delay=0, wait_after=0, max_wait=0).to_bytes()
    ack = mt.MsgsAck(msg_ids=[1]).to_bytes()
    s.receive(
        plain(container((cid(1), 3, ping), (cid(2), 5, wait), (cid(3), 7, ack)), cid(4), 9), NOW
    )
    assert objects(s.flush(NOW)) == [
        mt.MsgsAck(msg_ids=[cid(2), cid(3)]),
        mt.Pong(msg_id=cid(1), ping_id=1),
    ]


def test_nested_and_broken_containers() -> None:
    s = started_session()
    ping = mt.Ping(ping_id=1).to_bytes()
    inner = container((cid(1), 3, ping))
    s.receive(plain(container((cid(2), 4, inner), (cid(3), 5, ping)), cid(4), 6), NOW)
    s.receive(plain(inner[:-4], cid(5), 8), NOW)
    assert objects(s.flush(NOW)) == [
        mt.BadMsgNotification(bad_msg_id=cid(2), bad_msg_seqno=4, error_code=64),
        mt.Pong(msg_id=cid(3), ping_id=1),
        mt.BadMsgNotification(bad_msg_id=cid(5), bad_msg_seqno=8, error_code=64),
    ]


# -- acks, holding, resending ----------------------------------------------------------


def answered(s: ServerSession, k: int, result: bytes = b"\x01\0\0\0") -> int:
    """Run request cid(k) to completion; the msg_id of its flushed answer."""
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(k), 2 * k + 1), NOW)
    s.send_rpc_result(cid(k), result)
    (answer_id,) = [m[0] for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == RPC_RESULT]
    return answer_id


def test_msgs_ack_clears_held_answers() -> None:
    s = started_session()
    first = answered(s, 1)
    second = answered(s, 2)
    assert s.held_count == 2
    s.receive(plain(mt.MsgsAck(msg_ids=[first]).to_bytes(), cid(3), 6), NOW)
    assert s.held_count == 1
    s.on_reconnect()
    resent = [m[0] for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == RPC_RESULT]
    assert resent == [second]


def test_service_answers_are_not_held() -> None:
    s = started_session()
    s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(1), 3), NOW)
    s.flush(NOW)
    assert s.held_count == 0


def test_reconnect_resends_with_original_ids() -> None:
    s = started_session()
    s.send_update(b"\xaa\xbb\xcc\xdd")
    first = unpack(s.flush(NOW))
    assert len(first) == 1 and first[0][0] % 4 == 3 and first[0][1] % 2 == 1
    answer_id = answered(s, 1)
    s.on_reconnect()
    later = NOW + 10
    packets = s.flush(later)
    again = unpack(packets)
    # The answer and the update travel apart (answers first), with their own ids.
    assert again[0][0] == answer_id
    assert again[1] == first[0]
    _, _, container_id, container_seq, _ = decrypt_server(packets[0])
    assert container_id > answer_id and container_seq % 2 == 0
    # Nothing is resent twice without a new reason.
    assert s.flush(later) == []


def test_reconnect_renumbers_messages_too_old_to_keep_their_id() -> None:
    s = started_session()
    s.send_update(b"\xaa\xbb\xcc\xdd")
    ((old_id, old_seq, body),) = unpack(s.flush(NOW))
    s.on_reconnect()
    later = NOW + 250
    ((new_id, new_seq, new_body),) = unpack(s.flush(later))
    assert new_body == body
    assert new_id >> 32 == int(later) and new_id % 4 == 3
    assert new_seq > old_seq and new_seq % 2 == 1
    assert s.held_count == 1
    s.receive(plain(mt.MsgsAck(msg_ids=[new_id]).to_bytes(), cid(0, later), 2), later)
    assert s.held_count == 0


def test_msg_resend_req() -> None:
    s = started_session()
    answer_id = answered(s, 1)
    s.receive(plain(mt.MsgResendReq(msg_ids=[answer_id, 12345]).to_bytes(), cid(2), 4), NOW)
    resent = unpack(s.flush(NOW))
    assert [m[0] for m in resent] == [answer_id]


def test_msg_resend_ans_req() -> None:
    s = started_session()
    answer_id = answered(s, 1)
    s.receive(plain(mt.MsgResendAnsReq(msg_ids=[cid(1)]).to_bytes(), cid(2), 4), NOW)
    assert [m[0] for m in unpack(s.flush(NOW))] == [answer_id]


def test_held_store_is_bounded_oldest_dropped() -> None:
    s = started_session(max_held_messages=3)
    for k in range(5):
        s.send_update(bytes([k]) * 4)
    ids = [m[0] for m in unpack(s.flush(NOW))]
    assert s.held_count == 3
    s.on_reconnect()
    assert [m[0] for m in unpack(s.flush(NOW))] == ids[2:]


def test_held_store_bounded_by_bytes() -> None:
    s = started_session(max_held_bytes=1000)
    for k in range(4):
        s.send_update(bytes([k]) * 400)
    s.flush(NOW)
    assert s.held_count == 2


# -- state requests, drop answer, future salts, destroy session --------------------------


def test_msgs_state_req() -> None:
    s = started_session()  # cid(0) ping (content, acked, no rpc)
    s.receive(plain(mt.MsgsAck(msg_ids=[]).to_bytes(), cid(2), 2), NOW)  # not content
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(3), 3), NOW)  # running
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(4), 5), NOW)
    s.send_rpc_result(cid(4), b"\0\0\0\0")  # answered, ack not sent yet
    s.receive(plain(mt.Ping(ping_id=1).to_bytes(), cid(7), 7), NOW)
    ids = [cid(0), cid(1), cid(2), cid(3), cid(4), cid(9), BASE - (400 << 32), BASE + (60 << 32)]
    s.receive(plain(mt.MsgsStateReq(msg_ids=ids).to_bytes(), cid(8), 9), NOW)
    infos = [o for o in objects(s.flush(NOW)) if isinstance(o, mt.MsgsStateInfo)]
    assert len(infos) == 1
    assert infos[0].req_msg_id == cid(8)
    assert infos[0].info.encode("latin-1") == bytes(
        [
            4 + 8,  # received and acknowledged
            2,  # between received ids: not received
            4 + 16,  # received, needs no ack
            4 + 32,  # received, query running
            4 + 32 + 64,  # received, answered
            3,  # above every received id
            1,  # too old to know
            3,  # too new
        ]
    )


def test_msgs_state_info_bytes_are_raw() -> None:
    s = started_session()
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    s.send_rpc_result(cid(1), b"\0\0\0\0")
    s.flush(NOW)  # the ack goes out: state 4 + 8 + 32 + 64
    s.receive(plain(mt.MsgsStateReq(msg_ids=[cid(1)]).to_bytes(), cid(2), 5), NOW)
    (_, _, body) = [m for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == 0x04DEB57D][0]
    assert body == struct.pack("<Iq", 0x04DEB57D, cid(2)) + bytes([1, 4 + 8 + 32 + 64, 0, 0])


def test_rpc_drop_answer_running() -> None:
    s = started_session()
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    events = s.receive(plain(mt.RpcDropAnswer(req_msg_id=cid(1)).to_bytes(), cid(2), 5), NOW)
    assert events == [CancelRpc(cid(1))]
    assert not s.send_rpc_result(cid(1), b"\0\0\0\0")  # late answer is discarded
    results = [o for o in objects(s.flush(NOW)) if isinstance(o, tuple)]
    assert results == [("rpc_result", cid(2), mt.RpcAnswerDroppedRunning().to_bytes())]


def test_rpc_drop_answer_held() -> None:
    s = started_session()
    answer_id = answered(s, 1, b"\x01\x02\x03\x04")
    events = s.receive(plain(mt.RpcDropAnswer(req_msg_id=cid(1)).to_bytes(), cid(2), 5), NOW)
    assert events == []
    msgs = unpack(s.flush(NOW))
    seq_of_answer = 5  # started session: new_session_created 1, pong 3, then this answer
    dropped = mt.RpcAnswerDropped(msg_id=answer_id, seq_no=seq_of_answer, bytes=16)
    assert [m[2] for m in msgs if constructor_id(m[2]) == RPC_RESULT] == [
        struct.pack("<Iq", RPC_RESULT, cid(2)) + dropped.to_bytes()
    ]
    assert s.held_count == 0


def test_rpc_drop_answer_queued_not_sent() -> None:
    s = started_session()
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    s.send_rpc_result(cid(1), b"\0\0\0\0")
    assert s.receive(plain(mt.RpcDropAnswer(req_msg_id=cid(1)).to_bytes(), cid(2), 5), NOW) == []
    results = [o for o in objects(s.flush(NOW)) if isinstance(o, tuple)]
    assert results == [("rpc_result", cid(2), mt.RpcAnswerDroppedRunning().to_bytes())]


def test_rpc_drop_answer_unknown() -> None:
    s = started_session()
    s.receive(plain(mt.RpcDropAnswer(req_msg_id=cid(1)).to_bytes(), cid(2), 3), NOW)
    results = [o for o in objects(s.flush(NOW)) if isinstance(o, tuple)]
    assert results == [("rpc_result", cid(2), mt.RpcAnswerUnknown().to_bytes())]


def test_get_future_salts_is_answered_bare() -> None:
    s = started_session()
    assert s.receive(plain(mt.GetFutureSalts(num=3).to_bytes(), cid(1), 3), NOW) == []
    found = objects(s.flush(NOW))
    (answer,) = [o for o in found if isinstance(o, mt.FutureSalts)]
    assert answer.req_msg_id == cid(1)
    assert answer.now == int(NOW)
    expected = salts.future_salts(SECRET, AUTH_KEY_ID, NOW, 3)
    assert [(f.valid_since, f.valid_until, f.salt) for f in answer.salts] == expected
    assert answer.salts[0].salt == SALT
    # its answer acknowledges it: no msgs_ack goes ahead of it
    assert not [o for o in found if isinstance(o, mt.MsgsAck)]


def test_destroy_session() -> None:
    s = started_session()
    events = s.receive(plain(mt.DestroySession(session_id=77).to_bytes(), cid(1), 3), NOW)
    assert events == [DestroySession(77)]
    s.answer_destroy_session(77, True)
    s.receive(plain(mt.DestroySession(session_id=78).to_bytes(), cid(2), 5), NOW)
    s.answer_destroy_session(78, False)
    # The current session is not destroyed from inside itself.
    own = s.receive(plain(mt.DestroySession(session_id=SESSION_ID).to_bytes(), cid(3), 7), NOW)
    assert own == []
    found = objects(s.flush(NOW))[1:]
    assert found == [
        mt.DestroySessionOk(session_id=77),
        mt.DestroySessionNone(session_id=78),
        mt.DestroySessionNone(session_id=SESSION_ID),
    ]


def test_http_wait_ignored() -> None:
    s = started_session()
    body = mt.HttpWait(max_delay=0, wait_after=0, max_wait=25000).to_bytes()
    assert s.receive(plain(body, cid(1), 2), NOW) == []
    assert s.flush(NOW) == []


# -- flush: ids, seq_nos and container bounds ------------------------------------------


def test_flush_nothing() -> None:
    assert new_session().flush(NOW) == []


def test_single_message_is_sent_bare() -> None:
    s = started_session()
    s.send_update(b"\x01\x02\x03\x04")
    packets = s.flush(NOW)
    _, _, msg_id, seq_no, body = decrypt_server(packets[0])
    assert body == b"\x01\x02\x03\x04"
    assert msg_id % 4 == 3 and seq_no == 5  # after new_session_created (1) and pong (3)


def test_flush_seq_nos_and_ids() -> None:
    s = started_session()
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    s.send_update(b"\x01\0\0\0")
    s.send_update(b"\x03\0\0\0")
    packets = s.flush(NOW)
    assert len(packets) == 1
    _, _, container_id, container_seq, _ = decrypt_server(packets[0])
    msgs = unpack(packets)
    assert [m[1] for m in msgs] == [4, 5, 7]  # ack, then content 2n+1
    assert [m[0] % 4 for m in msgs] == [1, 3, 3]
    assert [m[0] for m in msgs] == sorted(m[0] for m in msgs)
    assert container_id > msgs[-1][0]
    assert container_seq == 8


def test_answers_and_pushes_never_share_a_packet() -> None:
    # Queue order is kept; an rpc_result (answer or error) starts a packet of its own
    # kind; acks and other service messages go with whichever run they fall in.
    s = started_session()
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(2), 5), NOW)
    s.send_update(b"\x01\0\0\0")
    s.send_rpc_result(cid(1), b"\x02\0\0\0")
    s.receive(plain(mt.Ping(ping_id=9).to_bytes(), cid(3), 6), NOW)
    s.send_rpc_error(cid(2), 400, "BAD")
    s.send_update(b"\x03\0\0\0")
    packets = s.flush(NOW)
    shapes = []
    outer_ids = []
    for packet in packets:
        _, _, msg_id, _, body = decrypt_server(packet)
        outer_ids.append(msg_id)
        items = _items(body) if constructor_id(body) == MSG_CONTAINER_ID else [(0, 0, body)]
        shapes.append([constructor_id(b) for _, _, b in items])
    ack, pong = mt.MsgsAck.CONSTRUCTOR_ID, mt.Pong.CONSTRUCTOR_ID
    assert shapes == [[ack, 1], [RPC_RESULT, pong, RPC_RESULT], [3]]
    assert outer_ids == sorted(outer_ids)  # packets leave in msg_id order
    msgs = unpack(packets)
    assert [m[0] for m in msgs] == sorted(m[0] for m in msgs)
    assert [m[1] for m in msgs] == [4, 5, 7, 9, 11, 13]


def test_resent_answers_and_pushes_travel_apart() -> None:
    s = started_session()
    s.send_update(b"\xaa\xbb\xcc\xdd")
    (update,) = unpack(s.flush(NOW))
    answer_id = answered(s, 1)
    s.on_reconnect()
    packets = s.flush(NOW + 10)
    assert len(packets) == 2
    assert [m[0] for m in unpack(packets[:1])] == [answer_id]
    assert unpack(packets[1:]) == [update]
    for packet in packets:  # resent messages always travel in a container
        assert constructor_id(decrypt_server(packet)[4]) == MSG_CONTAINER_ID


def test_container_item_count_bound() -> None:
    s = started_session()
    for k in range(2500):
        s.send_update(struct.pack("<i", k))
    packets = s.flush(NOW)
    sizes = [len(_items(decrypt_server(p)[4])) for p in packets]
    assert sizes == [1000, 1000, 500]
    seqs = [m[1] for m in unpack(packets)]
    assert seqs == [5 + 2 * k for k in range(2500)]


def test_container_byte_bound() -> None:
    s = started_session()
    big = b"\x07" * (400 * 1024)
    for _ in range(3):
        s.send_update(big)
    s.send_update(b"\x08" * (1100 * 1024))  # alone above the bound: sent bare
    packets = s.flush(NOW)
    shapes = []
    for p in packets:
        body = decrypt_server(p)[4]
        if constructor_id(body) == MSG_CONTAINER_ID:
            shapes.append(("container", len(_items(body))))
        else:
            shapes.append(("bare", len(body)))
    assert shapes == [("container", 2), ("bare", 400 * 1024), ("bare", 1100 * 1024)]
    for p in packets:
        assert len(decrypt_server(p)[4]) <= max(1 << 20, 1100 * 1024)


def test_many_acks_are_chunked() -> None:
    s = started_session(replay_window=20000)
    wait = mt.HttpWait(max_delay=0, wait_after=0, max_wait=0).to_bytes()
    for j in range(9):
        items = [(BASE + 4 * (1000 * j + k), 1 + 2 * k, wait) for k in range(1000)]
        s.receive(plain(container(*items), BASE + 4 * (10000 + j), 2000), NOW)
    acks = [o for o in objects(s.flush(NOW)) if isinstance(o, mt.MsgsAck)]
    assert [len(a.msg_ids) for a in acks] == [8192, 808]
    assert acks[0].msg_ids[0] == BASE and acks[1].msg_ids[-1] == BASE + 4 * 8999


# -- Telethon's client against the session ----------------------------------------------


def telethon_state(salt: int) -> MTProtoState:
    loggers: defaultdict[str, logging.Logger] = defaultdict(lambda: logging.getLogger("tt"))
    state = MTProtoState(AuthKey(AUTH_KEY), loggers)
    state.id = SESSION_ID
    state.salt = salt
    return state


def telethon_packet(state: MTProtoState, requests: list[Any]) -> tuple[bytes, list[int]]:
    """Encrypted client packet (after auth_key_id) with these requests, as Telethon sends."""
    import io

    buffer = io.BytesIO()
    ids = [state.write_data_as_message(buffer, bytes(r), True) for r in requests]
    data = buffer.getvalue()
    if len(requests) > 1:
        data = struct.pack("<Ii", MSG_CONTAINER_ID, len(requests)) + data
        buffer = io.BytesIO()
        state.write_data_as_message(buffer, data, content_related=False)
        data = buffer.getvalue()
    return state.encrypt_message_data(data)[8:], ids


def test_telethon_round_trip() -> None:
    now = time.time()
    salt = salts.current_salt(SECRET, AUTH_KEY_ID, now)
    client = telethon_state(salt)
    s = ServerSession(AUTH_KEY, AUTH_KEY_ID, SESSION_ID, SECRET, fake_random)

    wire, (ping_id, config_id) = telethon_packet(
        client, [tfunctions.PingRequest(ping_id=42), tfunctions.help.GetConfigRequest()]
    )
    plaintext = crypto.decrypt_client_message(AUTH_KEY, wire)
    events = s.receive(plaintext, now)
    assert events == [RpcRequest(config_id, functions.help.GetConfig())]
    assert s.send_rpc_error(config_id, 420, "FLOOD_WAIT_3")

    (packet,) = s.flush(time.time())
    message = client.decrypt_message_data(packet)
    assert isinstance(message.obj, MessageContainer)
    got = [m.obj for m in message.obj.messages]
    # The ping is acknowledged by its pong.
    assert isinstance(got[0], ttypes.MsgsAck) and got[0].msg_ids == [config_id]
    assert isinstance(got[1], ttypes.NewSessionCreated) and got[1].server_salt == salt
    assert got[1].first_msg_id == ping_id
    assert isinstance(got[2], ttypes.Pong) and (got[2].msg_id, got[2].ping_id) == (ping_id, 42)
    assert got[3].req_msg_id == config_id and got[3].error.error_message == "FLOOD_WAIT_3"

    # A second packet, with a wrong salt: Telethon reads bad_server_salt.
    client.salt = salt ^ 1
    wire, (retry_id,) = telethon_packet(client, [tfunctions.PingRequest(ping_id=43)])
    assert s.receive(crypto.decrypt_client_message(AUTH_KEY, wire), now) == []
    (packet,) = s.flush(time.time())
    notice = client.decrypt_message_data(packet).obj
    assert isinstance(notice, ttypes.BadServerSalt)
    assert notice.bad_msg_id == retry_id and notice.new_server_salt == salt


# -- resend loops -----------------------------------------------------------------------


def test_reconnect_loop_over_one_answer_drops_it(caplog: pytest.LogCaptureFixture) -> None:
    # A client that reconnects after every resend of the same answer, never acking it,
    # gets it MAX_RESENDS times more, then no longer; the update it did ack is unaffected.
    s = started_session()
    result = functions.help.GetConfig().to_bytes()  # any constructor, named in the log
    answer_id = answered(s, 1, result)
    s.send_update(b"\xaa\xbb\xcc\xdd")
    (update,) = unpack(s.flush(NOW))
    caplog.set_level(logging.WARNING, logger="telesrv")
    for k in range(3):
        s.on_reconnect()
        again = unpack(s.flush(NOW + k))
        assert [m[0] for m in again] == ([answer_id, update[0]] if k == 0 else [answer_id])
        if k == 0:
            s.receive(plain(mt.MsgsAck(msg_ids=[update[0]]).to_bytes(), cid(2), 4), NOW)
    assert not [r for r in caplog.records if "dropping held" in r.getMessage()]
    s.on_reconnect()
    assert s.flush(NOW + 3) == []
    assert s.held_count == 0
    (warning,) = [r for r in caplog.records if "dropping held" in r.getMessage()]
    assert warning.levelname == "WARNING"
    assert f"{constructor_id(result):#010x}" in warning.getMessage()
    s.on_reconnect()  # dropped once, logged once
    assert s.flush(NOW + 4) == []
    assert len([r for r in caplog.records if "dropping held" in r.getMessage()]) == 1


def test_acknowledged_resend_is_not_dropped() -> None:
    s = started_session()
    answer_id = answered(s, 1)
    for k in range(3):
        s.on_reconnect()
        assert [m[0] for m in unpack(s.flush(NOW + k))] == [answer_id]
    s.receive(plain(mt.MsgsAck(msg_ids=[answer_id]).to_bytes(), cid(2), 4), NOW)
    assert s.held_count == 0
    # A later answer starts its own count.
    second = answered(s, 3)
    for k in range(3):
        s.on_reconnect()
        assert [m[0] for m in unpack(s.flush(NOW + k))] == [second]


def test_reconnects_without_a_flush_do_not_count() -> None:
    # Only resends that were actually sent count towards the loop.
    s = started_session()
    answer_id = answered(s, 1)
    for _ in range(10):
        s.on_reconnect()
    assert [m[0] for m in unpack(s.flush(NOW))] == [answer_id]
    assert s.held_count == 1


# -- asking again for an answer that was forgotten ---------------------------------------


def _retry_error(req_msg_id: int) -> tuple[str, int, bytes]:
    return ("rpc_result", req_msg_id, encode_rpc_error(req_msg_id, 500, "RPC_CALL_FAIL")[12:])


def _loop_until_dropped(s: ServerSession, answer_id: int) -> None:
    for k in range(3):
        s.on_reconnect()
        assert [m[0] for m in unpack(s.flush(NOW + k))] == [answer_id]
    s.on_reconnect()
    assert s.flush(NOW + 3) == []


def test_request_sent_again_after_its_answer_was_dropped_gets_retry_error() -> None:
    # A client on a flaky link that sends its request again under the same msg_id
    # (as MTProto allows) must not wait forever for the answer the resend loop dropped:
    # it is told to retry, which it does under a new msg_id.
    s = started_session()
    request = plain(functions.help.GetConfig().to_bytes(), cid(1), 3)
    s.receive(request, NOW)
    s.send_rpc_result(cid(1), b"\x01\0\0\0")
    (answer_id,) = [m[0] for m in unpack(s.flush(NOW)) if constructor_id(m[2]) == RPC_RESULT]
    _loop_until_dropped(s, answer_id)
    assert s.receive(request, NOW + 4) == []  # a duplicate: not run again
    assert objects(s.flush(NOW + 4)) == [mt.MsgsAck(msg_ids=[cid(1)]), _retry_error(cid(1))]
    # The retry is a new request and is run.
    retry = plain(functions.help.GetConfig().to_bytes(), cid(2, NOW + 4), 5)
    assert s.receive(retry, NOW + 4) == [RpcRequest(cid(2, NOW + 4), functions.help.GetConfig())]
    # Asking again after the error was lost gets it again.
    assert s.receive(request, NOW + 5) == []
    assert _retry_error(cid(1)) in objects(s.flush(NOW + 5))


def test_msg_resend_ans_req_for_a_dropped_answer_gets_retry_error() -> None:
    s = started_session()
    answer_id = answered(s, 1)
    _loop_until_dropped(s, answer_id)
    s.receive(plain(mt.MsgResendAnsReq(msg_ids=[cid(1)]).to_bytes(), cid(2), 4), NOW + 4)
    assert objects(s.flush(NOW + 4)) == [_retry_error(cid(1))]


def test_request_sent_again_after_a_budget_drop_gets_retry_error() -> None:
    s = started_session(max_held_messages=1)
    answered(s, 1)
    answered(s, 2)  # the first answer is forgotten to make room
    assert s.held_count == 1
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    assert _retry_error(cid(1)) in objects(s.flush(NOW))


def test_request_sent_again_after_its_answer_was_acked_gets_no_error() -> None:
    # An acknowledged answer reached the client: a late duplicate is only re-acked.
    s = started_session()
    answer_id = answered(s, 1)
    s.receive(plain(mt.MsgsAck(msg_ids=[answer_id]).to_bytes(), cid(2), 4), NOW)
    s.receive(plain(functions.help.GetConfig().to_bytes(), cid(1), 3), NOW)
    assert objects(s.flush(NOW)) == [mt.MsgsAck(msg_ids=[cid(1)])]
    s.receive(plain(mt.MsgResendAnsReq(msg_ids=[cid(1)]).to_bytes(), cid(3), 6), NOW)
    assert s.flush(NOW) == []


def test_state_of_a_request_whose_answer_was_dropped_is_answered() -> None:
    # msgs_state_info keeps to the documented bits: received, acked, answered.
    s = started_session()
    answer_id = answered(s, 1)
    _loop_until_dropped(s, answer_id)
    s.receive(plain(mt.MsgsStateReq(msg_ids=[cid(1)]).to_bytes(), cid(2), 4), NOW + 4)
    (info,) = [o for o in objects(s.flush(NOW + 4)) if isinstance(o, mt.MsgsStateInfo)]
    assert info.info.encode("latin-1") == bytes([4 + 8 + 32 + 64])


def test_service_answers_travel_apart_from_pushes() -> None:
    # A bad_server_salt (or pong, bad_msg_notification) queued after a push must not
    # share its packet: a client that cannot parse the push would lose the correction
    # and wait on its request.
    s = started_session()
    s.send_update(b"\xaa\xbb\xcc\xdd")
    body = functions.help.GetConfig().to_bytes()
    s.receive(plain(body, cid(1), 3, salt=SALT ^ 1), NOW)
    s.receive(plain(mt.Ping(ping_id=5).to_bytes(), cid(2), 4), NOW)
    packets = s.flush(NOW)
    assert len(packets) == 2
    pushed, answers = (unpack([p]) for p in packets)
    assert [m[2] for m in pushed] == [b"\xaa\xbb\xcc\xdd"]
    assert [type(decode(m[2])) for m in answers] == [mt.BadServerSalt, mt.Pong]


def test_many_dropped_resends_make_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    # A session may hold hundreds of messages: their drop is one line, not one each.
    s = started_session()
    for k in range(1, 6):
        answered(s, k)
    for k in range(3):
        s.on_reconnect()
        s.flush(NOW + k)
    caplog.set_level(logging.WARNING, logger="telesrv")
    s.on_reconnect()
    assert s.held_count == 0
    (warning,) = [r for r in caplog.records if "dropping" in r.getMessage()]
    assert "each: 5 (" in warning.getMessage()
    assert "0x00000001 x5" in warning.getMessage()


def test_compact_forgets_received_ids_once_too_old_to_be_sent() -> None:
    s = started_session()  # received cid(0), just before NOW
    s.receive(plain(mt.Ping(ping_id=2).to_bytes(), cid(1), 3), NOW)
    s.flush(NOW)
    s.compact(NOW + 299)  # a client may still send them: kept
    assert cid(0) in s._seen and cid(1) in s._seen
    s.compact(NOW + 300)  # past the age a client may send: gone, and known too old
    assert len(s._seen) == 0
    assert s._seen.is_too_old(cid(1))
    later = NOW + 300
    fresh = cid(0, later)
    s.receive(plain(mt.Ping(ping_id=3).to_bytes(), fresh, 5), later)
    assert [o for o in objects(s.flush(later)) if isinstance(o, mt.Pong)] == [
        mt.Pong(msg_id=fresh, ping_id=3)
    ]
    s.receive(plain(mt.Ping(ping_id=3).to_bytes(), fresh, 5), later)  # a replay
    assert not [o for o in objects(s.flush(later)) if isinstance(o, mt.Pong)]
