"""Attacks on the MTProto layer, over real sockets against the real gateway.

Each attack gets its error (or the connection is closed) while a well-behaved
Telethon client on another connection keeps working.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from e2e.conftest import ClientFactory, RunningServer
from telethon import TelegramClient, functions, types

from telesrv.bench._client import (
    EncryptedClient,
    EncryptedSession,
    PublicKey,
    RawConnection,
    connect_new_key,
)
from telesrv.gateway.connection import ClientConnection
from telesrv.gateway.sessions import DETACHED_HELD_SECONDS, SessionManager
from telesrv.mtproto.crypto import auth_key_id
from telesrv.mtproto.held_messages import HELD_OVERHEAD
from telesrv.tl import decode, mt, service
from telesrv.tl import functions as tl_functions
from telesrv.tl import types as tl_types
from telesrv.tl.core import MAX_GZIP_OUTPUT

GET_CONFIG = tl_functions.help.GetConfig().to_bytes()


@pytest.fixture
async def good_client(make_client: ClientFactory) -> AsyncIterator[TelegramClient]:
    """A Telethon client connected before the abuse starts."""
    client = make_client()
    await client.connect()
    await client(functions.help.GetConfigRequest())
    yield client


async def still_works(client: TelegramClient) -> None:
    config = await client(functions.help.GetConfigRequest())
    assert isinstance(config, types.Config)


def server_public_key(server: RunningServer) -> PublicKey:
    numbers = server.resources.server_key.private_key.public_key().public_numbers()
    return PublicKey(numbers.n, numbers.e)


async def new_raw_client(server: RunningServer) -> EncryptedClient:
    """A fresh permanent key on a new connection, not logged in, salt learnt."""
    client, _ = await connect_new_key(server.host, server.port, server_public_key(server))
    await client.ping(0)
    return client


def rpc_error_of(answer: bytes) -> str:
    error = decode(answer)
    assert isinstance(error, mt.RpcError), error
    return error.error_message


# -- gzip_packed ----------------------------------------------------------------------


def nested_gzip_bomb(levels: int, padding: int) -> bytes:
    """help.getConfig packed ``levels`` (>= 2) times; inside every level but the
    outermost the packed object is followed by ``padding`` zero bytes."""
    body = GET_CONFIG
    for _ in range(levels - 1):
        body = service.gzip_packed(body + b"\0" * padding)
    return service.gzip_packed(body)


def send_message_of(size: int) -> bytes:
    """A sendMessage request of about ``size`` bytes (it decodes; it needs login)."""
    return tl_functions.messages.SendMessage(
        peer=tl_types.InputPeerSelf(), message="x" * size, random_id=1
    ).to_bytes()


@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(lambda: nested_gzip_bomb(2, 0), id="packed-in-packed"),
        pytest.param(lambda: nested_gzip_bomb(3, 4), id="padded-levels"),
        pytest.param(lambda: nested_gzip_bomb(60, 1 << 20), id="60-levels-of-1MiB"),
        pytest.param(
            lambda: service.gzip_packed(send_message_of(MAX_GZIP_OUTPUT + 1)), id="past-budget"
        ),
    ],
)
async def test_gzip_packed_bomb_is_refused(
    server: RunningServer, good_client: TelegramClient, bomb: Callable[[], bytes]
) -> None:
    client = await new_raw_client(server)
    data = bomb()
    assert len(data) < server.gateway.limits.max_frame
    assert rpc_error_of(await client.call(data)) == "INPUT_CONSTRUCTOR_INVALID"
    await client.ping(1)  # the same connection keeps serving
    await still_works(good_client)
    await client.conn.close()


async def test_gzip_packed_at_the_budget_is_decoded(server: RunningServer) -> None:
    client = await new_raw_client(server)
    size = len(send_message_of(0))
    at_limit = send_message_of(MAX_GZIP_OUTPUT - size - 3)  # padding to 4 bytes
    assert len(at_limit) == MAX_GZIP_OUTPUT
    assert rpc_error_of(await client.call(service.gzip_packed(at_limit))) == (
        "AUTH_KEY_UNREGISTERED"  # decoded, then refused for want of login
    )
    await client.conn.close()


async def test_gzip_packed_request_within_the_budget_is_served(server: RunningServer) -> None:
    client = await new_raw_client(server)
    assert decode(await client.call(nested_gzip_bomb(1, 0))).TL_NAME == "config"
    # A packed request inside a wrapper (as TDLib sends them) is served too.
    wrapper = tl_functions.InvokeWithoutUpdates(query=tl_functions.help.GetConfig()).to_bytes()
    answer = await client.call(wrapper[:4] + service.gzip_packed(GET_CONFIG))
    assert decode(answer).TL_NAME == "config"
    await client.conn.close()


async def test_container_of_gzip_packed_items_shares_one_budget(
    server: RunningServer, good_client: TelegramClient
) -> None:
    client = await new_raw_client(server)
    session = client.session
    packed = service.gzip_packed(send_message_of(MAX_GZIP_OUTPUT * 2 // 5))
    ids = [session.clock.next() for _ in range(3)]
    items = [service.ContainerItem(i, session.next_seq_no(True), packed) for i in ids]
    _, payload = session.encrypt(service.encode_container(items), content=False)
    client.conn.send(payload)
    errors: dict[int, str] = {}
    async with asyncio.timeout(10):
        while len(errors) < 3:
            for m in await client.recv_messages():
                if m.constructor == mt.RpcResult.CONSTRUCTOR_ID:
                    req_msg_id = struct.unpack_from("<q", m.body, 4)[0]
                    errors[req_msg_id] = rpc_error_of(m.body[12:])
    # Two items fit the message's budget (and then need login); the third does not.
    assert errors == {
        ids[0]: "AUTH_KEY_UNREGISTERED",
        ids[1]: "AUTH_KEY_UNREGISTERED",
        ids[2]: "INPUT_CONSTRUCTOR_INVALID",
    }
    await client.ping(2)
    await still_works(good_client)
    await client.conn.close()


# -- held answers -----------------------------------------------------------------------


@pytest.fixture
def small_held_budgets(server: RunningServer) -> Iterator[SessionManager[ClientConnection]]:
    """Budgets small enough that a few unacknowledged getConfig answers cross them."""
    sessions = server.gateway.sessions
    saved = sessions.max_held_bytes_per_key, sessions.max_held_bytes
    sessions.max_held_bytes_per_key, sessions.max_held_bytes = 4 << 10, 10 << 10
    yield sessions
    sessions.max_held_bytes_per_key, sessions.max_held_bytes = saved


async def test_unacknowledged_answers_are_bounded_per_key_and_process(
    server: RunningServer,
    good_client: TelegramClient,
    small_held_budgets: SessionManager[ClientConnection],
) -> None:
    sessions = small_held_budgets
    public_key = server_public_key(server)
    clients: list[EncryptedClient] = []
    keys = []
    for _ in range(3):
        first, key = await connect_new_key(server.host, server.port, public_key)
        keys.append(key.auth_key_id)
        clients.append(first)
        for _ in range(3):  # more sessions of the same key, each on its own connection
            conn = await RawConnection.open(server.host, server.port)
            clients.append(EncryptedClient(conn, EncryptedSession(key.auth_key, key.salt)))
    answer_size = 0
    for _ in range(8):  # none of them ever acknowledges
        for client in clients:
            answer_size = len(await client.call(GET_CONFIG))
            for key_id in keys:
                assert sessions.held_bytes_of_key(key_id) <= sessions.max_held_bytes_per_key
            assert sessions.held_bytes <= sessions.max_held_bytes
    held_cost = answer_size + HELD_OVERHEAD
    assert 12 * 8 * held_cost > 3 * sessions.max_held_bytes  # the budgets did bind
    # The newest answers are the ones kept.
    last = sessions.get(keys[-1], clients[-1].session.session_id)
    assert last is not None and last.session.held_count > 0
    await still_works(good_client)

    for client in clients:
        await client.conn.close()
    entries = [sessions.get(k, c.session.session_id) for k, c in _pairs(keys, clients)]
    async with asyncio.timeout(5):
        while any(e is not None and e.connection is not None for e in entries):
            await asyncio.sleep(0.02)
    # Memory is tight (over half the process budget is held or the budget is tiny):
    # sessions without a connection lose what they hold long before they expire.
    sessions.max_held_bytes = 1
    sessions.expire(server.gateway.clock() + DETACHED_HELD_SECONDS)
    assert all(sessions.held_bytes_of_key(k) == 0 for k in keys)
    await still_works(good_client)


def _pairs(keys: list[int], clients: list[EncryptedClient]) -> list[tuple[int, EncryptedClient]]:
    """(auth_key_id, client): four clients per key, in the order they were made."""
    return [(keys[i // 4], c) for i, c in enumerate(clients)]


# -- invokeAfterMsg ---------------------------------------------------------------------


def invoke_after(msg_ids: list[int], query: bytes = GET_CONFIG) -> bytes:
    if len(msg_ids) == 1:
        head = struct.pack("<Iq", tl_functions.InvokeAfterMsg.CONSTRUCTOR_ID, msg_ids[0])
    else:
        head = struct.pack(
            f"<IIi{len(msg_ids)}q",
            tl_functions.InvokeAfterMsgs.CONSTRUCTOR_ID,
            0x1CB5C415,
            len(msg_ids),
            *msg_ids,
        )
    return head + query


async def test_invoke_after_msg_waiting_for_itself_fails(
    server: RunningServer, good_client: TelegramClient
) -> None:
    client = await new_raw_client(server)
    session = client.session
    async with asyncio.timeout(10):
        own = session.clock.next()
        answer = await client.call(invoke_after([own]), msg_id=own)
        assert rpc_error_of(answer) == "MSG_WAIT_FAILED"
        own = session.clock.next()
        never = own - 4000  # never sent: nothing to wait for
        answer = await client.call(invoke_after([never, own]), msg_id=own)
        assert rpc_error_of(answer) == "MSG_WAIT_FAILED"
        # Waiting for requests that never arrived (or finished) is no wait at all.
        own = session.clock.next()
        assert decode(await client.call(invoke_after([never]), msg_id=own)).TL_NAME == "config"
    entry = server.gateway.sessions.get(auth_key_id(session.auth_key), session.session_id)
    assert entry is not None and not entry.running and not entry.waiting
    await still_works(good_client)
    await client.conn.close()


# -- replay after a restart ----------------------------------------------------------------


async def test_request_replayed_after_a_restart_is_not_executed(
    server: RunningServer, make_client: ClientFactory
) -> None:
    survivor = make_client()  # stays connected across the restart
    await survivor.connect()
    await still_works(survivor)

    client = await new_raw_client(server)
    captured_id, captured = client.session.encrypt(GET_CONFIG)
    client.conn.send(captured)
    async with asyncio.timeout(10):
        while not any(
            m.constructor == mt.RpcResult.CONSTRUCTOR_ID
            and struct.unpack_from("<q", m.body, 4)[0] == captured_id
            for m in await client.recv_messages()
        ):
            pass
    await client.conn.close()
    old_salt = survivor._sender._state.salt

    await server.restart()

    conn = await RawConnection.open(server.host, server.port)
    replayer = EncryptedClient(conn, client.session)
    conn.send(captured)  # byte for byte, well within the msg_id window
    seen: list[int] = []
    async with asyncio.timeout(10):
        while mt.BadServerSalt.CONSTRUCTOR_ID not in seen:
            seen += [m.constructor for m in await replayer.recv_messages()]
        await replayer.ping(7)  # anything answered for the replay came before this
    salts = [
        decode(m.body)
        for m in replayer.received
        if m.constructor == mt.BadServerSalt.CONSTRUCTOR_ID
    ]
    assert [s.bad_msg_id for s in salts] == [captured_id]  # type: ignore[attr-defined]
    assert not any(
        m.constructor == mt.RpcResult.CONSTRUCTOR_ID
        and struct.unpack_from("<q", m.body, 4)[0] == captured_id
        for m in replayer.received
    )
    await conn.close()
    # A client that lived through the restart reconnects with the salt it had: told
    # bad_server_salt, it sends again and goes on.
    if not survivor.is_connected():
        await survivor.connect()
    await still_works(survivor)
    assert survivor._sender._state.salt != old_salt
