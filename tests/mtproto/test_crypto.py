import hashlib
import logging
import os
import struct
import time
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telethon import helpers
from telethon.crypto import AuthKey
from telethon.network.mtprotostate import MTProtoState

from telesrv.mtproto import crypto
from telesrv.mtproto.crypto import (
    CryptoError,
    aes_ige_decrypt,
    aes_ige_encrypt,
    auth_key_id,
    auth_key_id_bytes,
    decrypt_client_message,
    decrypt_client_message_with_ack,
    encrypt_server_message,
    message_aes_key_iv,
    message_key,
    new_nonce_hash,
    padding_length,
    quick_ack_token,
    tmp_aes_key_iv,
)

AUTH_KEY = b"".join(hashlib.sha256(b"telesrv test auth key %d" % i).digest() for i in range(8))
SALT = 0x0102030405060708
SESSION_ID = 0x1112131415161718

# Telethon's MTProtoState.encrypt_message_data of ping(ping_id=10) with msg_id
# 0x62a1b2c300000004, seq_no 1, padding bytes a0..b7 (24 bytes).
CLIENT_WIRE = bytes.fromhex(
    "9ecfd26a9c4801e3"
    "4ae5e9fd8a29f22645a28b06576dbabd"
    "7f2c05c1d2840cbbbd1d496c2de545efad1aac91025033c8aaab564f021d7276"
    "d79a537a4bc006e552ebb27f32bd563990b0b041f55027cb344ba037410f6e02"
)
CLIENT_PLAINTEXT = bytes.fromhex(
    "0807060504030201 1817161514131211 04000000c3b2a162 01000000 08000000 ec77be7a0a000000"
)
CLIENT_PADDING = bytes(range(0xA0, 0xA0 + 24))

# pong(msg_id=0x62a1b2c300000004, ping_id=10) as server msg 0x62a1b2c300000001,
# padding bytes b0..bb (12 bytes).
SERVER_PLAINTEXT = bytes.fromhex(
    "0807060504030201 1817161514131211 01000000c3b2a162 01000000 14000000"
    "c5737734 04000000c3b2a162 0a00000000000000"
)
SERVER_PADDING = bytes(range(0xB0, 0xB0 + 12))
SERVER_WIRE = bytes.fromhex(
    "9ecfd26a9c4801e3"
    "1dfce5b2b2c5375ed671669f9b129a1a"
    "2e127ded33d297ceafacad1eae39d4639e7f18ab9b20553fffdbe7c0d762bd3c"
    "ecc9802f3d4509d3abb6b67603a09a381cce657e004eb790c30102b0a37185ee"
)


def telethon_state() -> MTProtoState:
    state = MTProtoState(AuthKey(AUTH_KEY), defaultdict(lambda: logging.getLogger("telethon")))
    state.salt = SALT
    state.id = SESSION_ID
    return state


# -- vectors -------------------------------------------------------------------------


def test_auth_key_id() -> None:
    assert auth_key_id_bytes(AUTH_KEY).hex() == "9ecfd26a9c4801e3"
    assert auth_key_id(AUTH_KEY) == -2089308915478900834
    # Telethon keeps it unsigned; same 64 bits.
    assert auth_key_id(AUTH_KEY) % (1 << 64) == AuthKey(AUTH_KEY).key_id


def test_decrypt_client_vector() -> None:
    assert decrypt_client_message(AUTH_KEY, CLIENT_WIRE[8:]) == CLIENT_PLAINTEXT
    plaintext, token = decrypt_client_message_with_ack(AUTH_KEY, CLIENT_WIRE[8:])
    assert plaintext == CLIENT_PLAINTEXT
    assert token == 0xC7274C18
    # Quick ack: first 32 bits (LE) of SHA256(auth_key[88:120] + plaintext + padding), top bit set.
    large = hashlib.sha256(AUTH_KEY[88:120] + CLIENT_PLAINTEXT + CLIENT_PADDING).digest()
    assert token == int.from_bytes(large[:4], "little") | 0x80000000
    assert quick_ack_token(AUTH_KEY, CLIENT_PLAINTEXT + CLIENT_PADDING) == token


def test_encrypt_server_vector() -> None:
    assert encrypt_server_message(AUTH_KEY, SERVER_PLAINTEXT, SERVER_PADDING) == SERVER_WIRE


def test_message_key_and_aes_params_match_spec() -> None:
    data = SERVER_PLAINTEXT + SERVER_PADDING
    msg_key = message_key(AUTH_KEY, data, from_client=False)
    assert msg_key == SERVER_WIRE[8:24]
    assert msg_key == hashlib.sha256(AUTH_KEY[96:128] + data).digest()[8:24]
    key, iv = message_aes_key_iv(AUTH_KEY, msg_key, from_client=False)
    assert aes_ige_decrypt(SERVER_WIRE[24:], key, iv) == data
    assert aes_ige_encrypt(data, key, iv) == SERVER_WIRE[24:]
    # Telethon's derivation, client and server direction.
    for from_client in (True, False):
        assert message_aes_key_iv(AUTH_KEY, msg_key, from_client=from_client) == (
            MTProtoState._calc_key(AUTH_KEY, msg_key, from_client)
        )


NEW_NONCE = hashlib.sha256(b"new nonce").digest()
SERVER_NONCE = hashlib.md5(b"server nonce").digest()


def test_tmp_aes_key_iv_vector() -> None:
    key, iv = tmp_aes_key_iv(NEW_NONCE, SERVER_NONCE)
    assert key.hex() == "9d2333508fc04393c5e25d6a0180c35ba936c2d7f787c39400edcfe01b411cd5"
    assert iv.hex() == "69631c112d4da6ff0b08f4e80d1fac9e1e4fff3e0e2b5cf6b7e722b07713887b"
    assert (key, iv) == helpers.generate_key_data_from_nonce(
        int.from_bytes(SERVER_NONCE, "little", signed=True),
        int.from_bytes(NEW_NONCE, "little", signed=True),
    )


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1, "315ea30dd926b11f664e02a5b1bd3429"),
        (2, "b72912e66c469076576543c6e66638bf"),
        (3, "880bc5b37aaadcd5ac39a2c6b8ebba6a"),
    ],
)
def test_new_nonce_hash(number: int, expected: str) -> None:
    value = new_nonce_hash(NEW_NONCE, number, AUTH_KEY)
    assert value.hex() == expected
    telethon_value = AuthKey(AUTH_KEY).calc_new_nonce_hash(
        int.from_bytes(NEW_NONCE, "little", signed=True), number
    )
    assert int.from_bytes(value, "little", signed=True) == telethon_value


def test_bad_nonce_arguments() -> None:
    with pytest.raises(CryptoError):
        tmp_aes_key_iv(NEW_NONCE[:16], SERVER_NONCE)
    with pytest.raises(CryptoError):
        new_nonce_hash(NEW_NONCE, 4, AUTH_KEY)


# -- padding ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "extra", "expected"),
    [(0, 0, 16), (4, 0, 12), (8, 0, 24), (52, 0, 12), (48, 0, 16), (40, 0, 24), (4, 2, 44)],
)
def test_padding_length(n: int, extra: int, expected: int) -> None:
    assert padding_length(n, extra) == expected


@given(n=st.integers(min_value=0, max_value=1 << 20), extra=st.integers(min_value=0, max_value=62))
def test_padding_length_property(n: int, extra: int) -> None:
    size = padding_length(n, extra)
    assert 12 <= size <= 1024
    assert (n + size) % 16 == 0


def test_padding_length_limit() -> None:
    with pytest.raises(CryptoError):
        padding_length(4, 64)
    with pytest.raises(CryptoError):
        padding_length(-4)


def test_encrypt_rejects_bad_padding() -> None:
    for padding in [bytes(4), bytes(13), bytes(1040)]:
        with pytest.raises(CryptoError):
            encrypt_server_message(AUTH_KEY, SERVER_PLAINTEXT, padding)
    with pytest.raises(CryptoError):
        encrypt_server_message(AUTH_KEY[:128], SERVER_PLAINTEXT, SERVER_PADDING)


# -- Telethon interop ------------------------------------------------------------------


def test_telethon_client_to_server() -> None:
    state = telethon_state()
    for body in [bytes.fromhex("ec77be7a0a000000"), os.urandom(4000 * 4)]:
        inner = struct.pack("<qii", (int(time.time()) << 32) | 4, 1, len(body)) + body
        wire = state.encrypt_message_data(inner)
        assert wire[:8] == auth_key_id_bytes(AUTH_KEY)
        plaintext = decrypt_client_message(AUTH_KEY, wire[8:])
        assert plaintext == struct.pack("<qq", SALT, SESSION_ID) + inner


def test_telethon_server_to_client() -> None:
    state = telethon_state()
    msg_id = (int(time.time()) << 32) | 1
    pong = bytes.fromhex("c5737734") + struct.pack("<qq", 4, 77)
    for extra in (0, 5):
        plaintext = struct.pack("<qqqii", SALT, SESSION_ID, msg_id, 1, len(pong)) + pong
        padding = os.urandom(padding_length(len(plaintext), extra))
        message = state.decrypt_message_data(encrypt_server_message(AUTH_KEY, plaintext, padding))
        assert message is not None
        assert message.msg_id == msg_id
        assert message.obj.msg_id == 4
        assert message.obj.ping_id == 77
        msg_id += 4


# -- hostile input -------------------------------------------------------------------


def _encrypt_as_client(plaintext_with_padding: bytes) -> bytes:
    msg_key = message_key(AUTH_KEY, plaintext_with_padding, from_client=True)
    key, iv = message_aes_key_iv(AUTH_KEY, msg_key, from_client=True)
    return msg_key + aes_ige_encrypt(plaintext_with_padding, key, iv)


def test_client_helper_reproduces_vector() -> None:
    assert _encrypt_as_client(CLIENT_PLAINTEXT + CLIENT_PADDING) == CLIENT_WIRE[8:]


@pytest.mark.parametrize("position", [0, 15, 16, 40, len(CLIENT_WIRE) - 9])
def test_tampering_is_detected(position: int) -> None:
    body = bytearray(CLIENT_WIRE[8:])
    body[position] ^= 0x40
    with pytest.raises(CryptoError):
        decrypt_client_message(AUTH_KEY, bytes(body))


def test_wrong_auth_key() -> None:
    other = bytes(reversed(AUTH_KEY))
    with pytest.raises(CryptoError):
        decrypt_client_message(other, CLIENT_WIRE[8:])


@pytest.mark.parametrize("size", [0, 15, 16, 32, 47, 63, 65])
def test_bad_body_sizes(size: int) -> None:
    body = (CLIENT_WIRE[8:] * 2)[:size]
    with pytest.raises(CryptoError):
        decrypt_client_message(AUTH_KEY, body)


@pytest.mark.parametrize(
    ("length", "padding_size"),
    [
        (9, 19),  # length not a multiple of 4
        (12, 4),  # padding shorter than 12 bytes
        (12, 1044),  # padding longer than 1024 bytes
        (100, 12),  # length runs past the plaintext
        (0xFFFFFFFC, 12),  # huge length
    ],
)
def test_inner_length_rules(length: int, padding_size: int) -> None:
    body_size = min(length, 12)
    plaintext = struct.pack("<qqqiI", SALT, SESSION_ID, 4, 1, length) + bytes(body_size)
    padding = bytes(padding_size)
    data = plaintext + padding
    data += bytes(-len(data) % 16)
    with pytest.raises(CryptoError):
        decrypt_client_message(AUTH_KEY, _encrypt_as_client(data))


def test_inner_length_rules_accept_valid() -> None:
    plaintext = struct.pack("<qqqiI", SALT, SESSION_ID, 4, 1, 12) + bytes(12)
    assert decrypt_client_message(AUTH_KEY, _encrypt_as_client(plaintext + bytes(20))) == plaintext
    # 1012 is the largest padding <= 1024 that keeps whole blocks here; 1028 is too much.
    assert (
        decrypt_client_message(AUTH_KEY, _encrypt_as_client(plaintext + bytes(1012))) == plaintext
    )
    with pytest.raises(CryptoError):
        decrypt_client_message(AUTH_KEY, _encrypt_as_client(plaintext + bytes(1028)))


def test_allow_trailing_for_padded_transport() -> None:
    body = CLIENT_WIRE[8:] + b"\x01\x02\x03\x04\x05\x06\x07\x08"
    with pytest.raises(CryptoError):
        decrypt_client_message(AUTH_KEY, body)
    assert decrypt_client_message(AUTH_KEY, body, allow_trailing=True) == CLIENT_PLAINTEXT


def test_ige_rejects_partial_blocks() -> None:
    with pytest.raises(CryptoError):
        aes_ige_encrypt(bytes(15), bytes(32), bytes(32))
    with pytest.raises(CryptoError):
        aes_ige_decrypt(bytes(16), bytes(16), bytes(32))


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=400))
def test_random_bodies_only_raise_crypto_error(body: bytes) -> None:
    with pytest.raises(CryptoError):
        crypto.decrypt_client_message(AUTH_KEY, body)
