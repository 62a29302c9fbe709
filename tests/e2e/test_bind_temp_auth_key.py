"""auth.bindTempAuthKey from a spec-conformant client built here (no Python client does PFS).

The client creates a permanent key (p_q_inner_data_dc) and a temporary one
(p_q_inner_data_temp_dc), then sends auth.bindTempAuthKey on the temporary key with
bind_auth_key_inner encrypted under the permanent key, MTProto v1 style
(core.telegram.org/method/auth.bindTempAuthKey).
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import cryptg
import pytest

from telesrv.bench._client import ClientKey, EncryptedClient, PublicKey, connect_new_key
from telesrv.mtproto.crypto import auth_key_id
from telesrv.tl import decode, functions, mt

from .conftest import RunningServer

TEMP_LIFETIME = 3600
BOOL_TRUE = struct.pack("<I", 0x997275B5)
BOOL_FALSE = struct.pack("<I", 0xBC799737)


def v1_encrypt(auth_key: bytes, plaintext: bytes) -> bytes:
    """MTProto v1 client message: key id + SHA1 msg_key + AES-IGE(SHA1 KDF, x = 0)."""
    msg_key = hashlib.sha1(plaintext).digest()[4:20]
    a = hashlib.sha1(msg_key + auth_key[0:32]).digest()
    b = hashlib.sha1(auth_key[32:48] + msg_key + auth_key[48:64]).digest()
    c = hashlib.sha1(auth_key[64:96] + msg_key).digest()
    d = hashlib.sha1(msg_key + auth_key[96:128]).digest()
    key = a[0:8] + b[8:20] + c[4:16]
    iv = a[8:20] + b[0:8] + c[16:20] + d[0:8]
    padded = plaintext + os.urandom(-len(plaintext) % 16)
    return hashlib.sha1(auth_key).digest()[-8:] + msg_key + cryptg.encrypt_ige(padded, key, iv)


@dataclass
class Binding:
    perm: ClientKey
    temp: ClientKey
    temp_client: EncryptedClient


def public_key(server: RunningServer) -> PublicKey:
    numbers = server.resources.server_key.private_key.public_key().public_numbers()
    return PublicKey(numbers.n, numbers.e)


@pytest.fixture
async def keys(server: RunningServer) -> AsyncIterator[Binding]:
    perm_client, perm = await connect_new_key(server.host, server.port, public_key(server))
    await perm_client.conn.close()
    temp_client, temp = await connect_new_key(
        server.host, server.port, public_key(server), temp_expires_in=TEMP_LIFETIME
    )
    await temp_client.ping(1)  # learn the salt, so the bind request goes out once
    try:
        yield Binding(perm, temp, temp_client)
    finally:
        await temp_client.conn.close()


async def send_bind(
    client: EncryptedClient,
    perm: ClientKey,
    temp_id: int,
    *,
    nonce: int = 0x1122334455667788,
    inner_nonce: int | None = None,
    session_id: int | None = None,
    msg_id_delta: int = 0,
    seq_no: int = 0,
    expires_at: int | None = None,
    encrypt: object = v1_encrypt,
) -> object:
    msg_id = client.session.clock.next()
    expires = expires_at if expires_at is not None else int(time.time()) + TEMP_LIFETIME - 10
    inner = mt.BindAuthKeyInner(
        nonce=nonce if inner_nonce is None else inner_nonce,
        temp_auth_key_id=temp_id,
        perm_auth_key_id=perm.auth_key_id,
        temp_session_id=client.session.session_id if session_id is None else session_id,
        expires_at=expires,
    ).to_bytes()
    assert len(inner) == 40
    plaintext = os.urandom(16) + struct.pack("<qii", msg_id + msg_id_delta, seq_no, 40) + inner
    encrypted = encrypt(perm.auth_key, plaintext)  # type: ignore[operator]
    request = functions.auth.BindTempAuthKey(
        perm_auth_key_id=perm.auth_key_id, nonce=nonce, expires_at=expires,
        encrypted_message=encrypted,
    )  # fmt: skip
    answer = await client.call(request.to_bytes(), msg_id=msg_id)
    if answer in (BOOL_TRUE, BOOL_FALSE):
        return answer == BOOL_TRUE
    return decode(answer)


def assert_error(answer: object, message: str) -> None:
    assert isinstance(answer, mt.RpcError), answer
    assert answer.error_message == message


async def test_bind_then_sessions_stand_for_the_permanent_key(
    server: RunningServer, keys: Binding
) -> None:
    gateway = server.gateway
    temp_id = keys.temp.auth_key_id
    session_id = keys.temp_client.session.session_id
    entry = gateway.sessions.get(temp_id, session_id)
    assert entry is not None and entry.perm_auth_key_id == temp_id

    resolved: list[int] = []

    async def resolve_user(perm_auth_key_id: int) -> int | None:
        resolved.append(perm_auth_key_id)
        return 4242 if perm_auth_key_id == keys.perm.auth_key_id else None

    saved = gateway.resolve_user
    gateway.resolve_user = resolve_user
    try:
        answer = await send_bind(keys.temp_client, keys.perm, temp_id)
        assert answer is True

        row = await server.resources.db.pool.fetchrow(
            "SELECT perm_auth_key_id, expires_at FROM auth_keys WHERE auth_key_id = $1", temp_id
        )
        assert row["perm_auth_key_id"] == keys.perm.auth_key_id
        assert keys.temp.expires_at is not None
        assert row["expires_at"].timestamp() <= keys.temp.expires_at + 1

        # The already attached session now stands for the permanent key...
        assert entry.perm_auth_key_id == keys.perm.auth_key_id
        assert entry in gateway.sessions.sessions_of_key(keys.perm.auth_key_id)
        assert entry not in gateway.sessions.sessions_of_key(temp_id)
        # ...and its next call runs as the permanent key's user.
        config = decode(await keys.temp_client.call(functions.help.GetConfig().to_bytes()))
        assert config.TL_NAME == "config"
        assert resolved[-1] == keys.perm.auth_key_id
        assert entry.user_id == 4242
        assert entry.connection is not None and entry.connection.auth_key is not None
        assert entry.connection.auth_key.perm_auth_key_id == keys.perm.auth_key_id

        # A new session on the same key is created as the permanent key's too.
        keys.temp_client.session.session_id = int.from_bytes(os.urandom(8), "little", signed=True)
        await keys.temp_client.ping(2)
        fresh = gateway.sessions.get(temp_id, keys.temp_client.session.session_id)
        assert fresh is not None and fresh.perm_auth_key_id == keys.perm.auth_key_id
    finally:
        gateway.resolve_user = saved


async def test_rebinding_to_the_same_key_renews_and_to_another_fails(
    server: RunningServer, keys: Binding
) -> None:
    temp_id = keys.temp.auth_key_id
    assert await send_bind(keys.temp_client, keys.perm, temp_id) is True
    assert await send_bind(keys.temp_client, keys.perm, temp_id) is True
    other_client, other = await connect_new_key(server.host, server.port, public_key(server))
    await other_client.conn.close()
    assert_error(await send_bind(keys.temp_client, other, temp_id), "TEMP_AUTH_KEY_ALREADY_BOUND")


async def test_bind_on_a_permanent_key_is_refused(server: RunningServer, keys: Binding) -> None:
    client, key = await connect_new_key(server.host, server.port, public_key(server))
    try:
        await client.ping(1)
        assert_error(await send_bind(client, keys.perm, key.auth_key_id), "TEMP_AUTH_KEY_EMPTY")
    finally:
        await client.conn.close()


def with_key_id_of(key: bytes, encrypted: bytes) -> bytes:
    """``encrypted`` (under some other key) claiming to come from ``key``."""
    return hashlib.sha1(key).digest()[-8:] + encrypted[8:]


def v2_encrypt(auth_key: bytes, plaintext: bytes) -> bytes:
    """The same message with MTProto 2.0 rules: not what the spec asks for here."""
    from telesrv.mtproto import crypto

    data = plaintext + os.urandom(crypto.padding_length(len(plaintext)))
    msg_key = crypto.message_key(auth_key, data, from_client=True)
    key, iv = crypto.message_aes_key_iv(auth_key, msg_key, from_client=True)
    return crypto.auth_key_id_bytes(auth_key) + msg_key + crypto.aes_ige_encrypt(data, key, iv)


@pytest.mark.parametrize(
    "change",
    [
        {"inner_nonce": 99},
        {"session_id": 12345},
        {"msg_id_delta": 4},
        {"seq_no": 1},
        {"expires_at": int(time.time()) - 60},
        {"encrypt": v2_encrypt},
        {"encrypt": lambda key, pt: v1_encrypt(key, pt)[:-16]},
        {"encrypt": lambda key, pt: with_key_id_of(key, v1_encrypt(bytes(256), pt))},
    ],
    ids=[
        "nonce", "session", "msg_id", "seq_no", "expired", "mtproto2", "truncated", "wrong-key",
    ],
)  # fmt: skip
async def test_invalid_binding_messages(
    server: RunningServer, keys: Binding, change: dict[str, object]
) -> None:
    answer = await send_bind(keys.temp_client, keys.perm, keys.temp.auth_key_id, **change)  # type: ignore[arg-type]
    assert_error(answer, "ENCRYPTED_MESSAGE_INVALID")
    row = await server.resources.db.pool.fetchrow(
        "SELECT perm_auth_key_id FROM auth_keys WHERE auth_key_id = $1", keys.temp.auth_key_id
    )
    assert row["perm_auth_key_id"] is None
    entry = server.gateway.sessions.get(keys.temp.auth_key_id, keys.temp_client.session.session_id)
    assert entry is not None and entry.perm_auth_key_id == keys.temp.auth_key_id


async def test_unknown_permanent_key(server: RunningServer, keys: Binding) -> None:
    ghost_key = os.urandom(256)
    ghost = ClientKey(ghost_key, auth_key_id(ghost_key), 0, 0.0, None)
    answer = await send_bind(keys.temp_client, ghost, keys.temp.auth_key_id)
    assert_error(answer, "ENCRYPTED_MESSAGE_INVALID")
