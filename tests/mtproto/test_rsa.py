import hashlib
import os
from unittest import mock

import cryptg
import pytest
import rsa as pyrsa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from telethon.crypto import rsa as telethon_rsa

from telesrv.mtproto.rsa import RsaError, RsaInnerData, rsa_decrypt_inner_data, rsa_fingerprint

# 2048-bit key generated once for these tests only.
TEST_KEY_PEM = b"""-----BEGIN RSA PRIVATE KEY-----
MIIEpAIBAAKCAQEAybNQcN7AAhNdB94+zLFrlaFZsRPpLPQzNxwuxoRcToUU7CEA
3lfqV+erBIVRWicnnpM6/f+mJbdQ4HTOCKZYf4Qhi+/Je/ZBBS8Lerq5cZzfelsN
XnLWz1Ou8ZNfHlQHHZy4LY46Tp8xUPGYUv1yH7IhYV2t9exPYVLS9FrR+Ift1Ixw
8K+q2K4Kyr6JwIJv6JbNHPKgH1rFapuW/3yjD9WQB8IW/bqwtaedUuoKHg/Ax58K
nJP8Sg18oda6BsLDvM+/gGY+4v7LeJbjR3eLTzN4CUptZE98/5ffospF1UOQk5rM
X35RKltEcO2VaEodeh7r8nt3ahbLxubmvp+7RwIDAQABAoIBADlWNfm/+IkehAWm
keeST+j7Mwn5hQF4cc6qvklEexD/F9GAGEUcbMuMWbsxQs0D8GlNpSlrMQnrsJv9
2EvxLZsiLn8fLQGGITmeA/9hcTHwzD51/7jnoFTTjxmxMQroDBXI5TpeAgkzi8tc
wlZlIboM4xxQixErme0qpDk+UA375GgMnOryWm5Q+EyoTCSsX6/mryQSRyBof/cA
9CwR7bbJu0q6xEJTmmMmvmywcR8Ct9W82HobjXeUYlGe6Usxw+woS2xBaubPLDAr
BOXdEi3S3Mxi4b7Wks8BjfAEqsZsh3v3Q+TWy2HLXIVkuMIwrj7wAb/MrN/teqX9
gL1TMsECgYEA9sXBm3663sGjxgMpZKvLQJCnQt8Tinn1mL12A1rY97uIAG6DouIu
1PLAz3OiaenuYv4dxCi9wZGZsSA7WQzJdplf8iud2P35gGELuo/a2lfFTk/2Qpdq
+tbEhOnQoLowWxREdEWnMnkyf86TuH48gUsfmVJXklPxeogL8ZDgHbECgYEA0T4a
b/xQPYBVgefr3mjxRzHP8r9Zh8WOED0dghhd8vBiTyVLVEuWdPdZqNxo4d3yfzol
iRWnWZho4sGm4aX4+9GQLqq1jnu03ZxLk8byoO6RDqn4bblnMV3Vn1o0/xGTXIQN
0dHaonZ5SaOuO3geQi73ZfnWYoIzyvIRJK9GTncCgYEA4aUWUa7iBMofjPJbKTiF
U/ZxWw5L+fVnA1FK1ep+Nph91Zc4OvqDRCjs8USVIC/N0Sr34OQ4DwWp+XK1kcnF
dfLs7q2/WilxuVgDt4XO4pQbUG6BiYaXReKYM8jxAeb+TGoN5hvCtL5p1L/6B1s2
zCr7K+FFPgIP7rDz6uFEbSECgYAwMPN500zPvVz0PGwQn27ijNBuAjAmmxNrHghL
zDznFQIvZFGDKp2OduGJiKoHS0zsjIHUns4aToXpo9xBoC5GIS/p75s9I7S2TacC
dBGxiwCRtgfnjYn8zrXCq84E6RFdf3SHXKPUQyEQGsioHbQqXhLQw8fijEZNeY8F
OfEhZQKBgQDcLAavIHXUfcM2YZcbAPrz8A3tireHytBk9LJk1wT0DpHi3eAoFpQY
hxAisnXdohIUuVmQfBy7nYrzmireIIny+2IGI4VSeonzkCY/qhraVJDWDDjv6vTG
3Ktb1+RTuk9m9nlmfxzo9/hAtVdJXtDaif4j27qqOQm3+mxb4ltxPA==
-----END RSA PRIVATE KEY-----
"""


def _load_key() -> RSAPrivateKey:
    key = serialization.load_pem_private_key(TEST_KEY_PEM, None)
    assert isinstance(key, RSAPrivateKey)
    return key


KEY = _load_key()
PUBLIC = KEY.public_key().public_numbers()
PUBLIC_PEM = KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.PKCS1
)

# Stand-in for a serialized p_q_inner_data: constructor + 80 bytes.
INNER = bytes.fromhex("ec5ac983") + bytes(range(1, 81))

# RSA_PAD of INNER with temp_key = SHA256(b"temp key"), padding bytes 100..207.
RSA_PAD_VECTOR = bytes.fromhex(
    "039827d7067ef8ae57dc9808e735fe17bc11043db22f1188fbf1d3f074e03cf3"
    "e17d444d87b57c43190c69539e8567e8bfdd761c899eb5ddf6550fc35ae7e564"
    "a93af9ec9e47437f6e51ca8d35db6ff63b858999f54d2cabc2c263ddeb110731"
    "09c71a053829364a4d6e2510ddc82b9870d51eb36b209be7a260d5c7774cb5ae"
    "8b05bbad325946cf1487920cfa80dad2913afdedd96751b060e7627905dd199e"
    "14f28a85f683c2e1ca8ad453eb1efabaac755d2a8a27a1197bca218776bbe9d2"
    "cb767cb270b363f46778260bb3b2034fd017f933c4cfca4dbc6fdcae2df855f2"
    "22f39f8221ed75776684c244bddf4e13245f07c7390f8783dc85f36627a57396"
)
# Telethon's legacy rsa.encrypt of INNER with padding bytes 0..150.
LEGACY_VECTOR = bytes.fromhex(
    "4e4ad497d86ea6d0cdbaf95c040de4e5c47e4eae6220a4b8d43771f997d88506"
    "63f7722abbd7031b9bf354fd1e171c499143ff4f16fca8e42e5e28cdd7941d0f"
    "8210eb6a54ad79e297c9c87109d9227a7508eeb5520a2e3794cea8425f009231"
    "d6f1480be6fd020aaa20334cd13766227635716d92b2e32be2742b7204fdb176"
    "377b6ad24db3b8871e8ef6a3be201b305129ef4d985c2cfbd83b84ad760f3cdc"
    "4d52a17cbb2aea3dbe2d5eb13bc9f49b7733315eb3e00d06ac62037391e869e4"
    "123b01f769cd4dc7b89bb3beaa5a696785196e66fbc0cd6f3bf8317617a34098"
    "bfcc8e03bc37ba85c88e7a2c3f620725007e9cb2d4fdea64e523aa7f2c6d6467"
)


def rsa_pad_encrypt(data: bytes, temp_key: bytes, padding: bytes) -> bytes | None:
    """Client side of RSA_PAD, written from the spec (no reference client has it)."""
    data_with_padding = data + padding
    assert len(data_with_padding) == 192
    data_with_hash = data_with_padding[::-1] + hashlib.sha256(temp_key + data_with_padding).digest()
    aes_encrypted = cryptg.encrypt_ige(data_with_hash, temp_key, bytes(32))
    mask = hashlib.sha256(aes_encrypted).digest()
    temp_key_xor = bytes(a ^ b for a, b in zip(temp_key, mask, strict=True))
    value = int.from_bytes(temp_key_xor + aes_encrypted, "big")
    if value >= PUBLIC.n:
        return None  # the client retries with another temp_key
    return pow(value, PUBLIC.e, PUBLIC.n).to_bytes(256, "big")


# -- fingerprint ----------------------------------------------------------------


def test_fingerprint_vector() -> None:
    assert rsa_fingerprint(PUBLIC.n, PUBLIC.e) == 8663454650364945659
    assert rsa_fingerprint(PUBLIC.n, PUBLIC.e) == telethon_rsa._compute_fingerprint(
        pyrsa.PublicKey(PUBLIC.n, PUBLIC.e)
    )


def test_fingerprint_matches_telethon_for_telegram_keys() -> None:
    keys = telethon_rsa._server_keys
    assert keys
    for fingerprint, (key, _old) in keys.items():
        assert rsa_fingerprint(key.n, key.e) == fingerprint
    # A well-known Telegram production key fingerprint.
    assert 0x0BC35F3509F7B7A5 in {rsa_fingerprint(k.n, k.e) for k, _ in keys.values()}


def test_fingerprint_is_signed() -> None:
    values = {rsa_fingerprint(k.n, k.e) for k, _ in telethon_rsa._server_keys.values()}
    assert all(-(1 << 63) <= v < (1 << 63) for v in values)
    assert any(v < 0 for v in values)


# -- decryption vectors -----------------------------------------------------------------


def test_rsa_pad_vector() -> None:
    result = rsa_decrypt_inner_data(KEY, RSA_PAD_VECTOR)
    assert result.legacy is False
    assert result.data == INNER + bytes(range(100, 208))
    assert result.verify(len(INNER))
    assert not result.verify(193)


def test_rsa_pad_helper_reproduces_vector() -> None:
    encrypted = rsa_pad_encrypt(INNER, hashlib.sha256(b"temp key").digest(), bytes(range(100, 208)))
    assert encrypted == RSA_PAD_VECTOR


def test_legacy_vector() -> None:
    result = rsa_decrypt_inner_data(KEY, LEGACY_VECTOR)
    assert result == RsaInnerData(INNER, legacy=True)
    assert result.verify(len(INNER))
    assert not result.verify(len(INNER) - 4)


def test_accepts_private_numbers() -> None:
    assert rsa_decrypt_inner_data(KEY.private_numbers(), RSA_PAD_VECTOR).data[:84] == INNER


def test_leading_zeros_may_be_stripped() -> None:
    # The big-endian integer is what counts; a client may send fewer than 256 bytes.
    block = LEGACY_VECTOR
    value = int.from_bytes(block, "big")
    assert rsa_decrypt_inner_data(KEY, value.to_bytes(256, "big").lstrip(b"\0")).legacy


# -- interop ------------------------------------------------------------------------------


def test_telethon_legacy_encrypt() -> None:
    telethon_rsa.add_key(PUBLIC_PEM.decode(), old=False)
    fingerprint = rsa_fingerprint(PUBLIC.n, PUBLIC.e)
    for size in (4, 84, 128, 232):
        data = os.urandom(size)
        encrypted = telethon_rsa.encrypt(fingerprint, data)
        assert encrypted is not None
        assert rsa_decrypt_inner_data(KEY, encrypted) == RsaInnerData(data, legacy=True)


def test_telethon_legacy_with_zero_padding() -> None:
    # Zero padding looks like data; only the SHA1 tells where the data ends.
    telethon_rsa.add_key(PUBLIC_PEM.decode(), old=True)
    fingerprint = rsa_fingerprint(PUBLIC.n, PUBLIC.e)
    with mock.patch("telethon.crypto.rsa.os.urandom", side_effect=lambda n: bytes(n)):
        encrypted = telethon_rsa.encrypt(fingerprint, INNER, use_old=True)
    assert rsa_decrypt_inner_data(KEY, encrypted).data == INNER


def test_random_rsa_pad_round_trips() -> None:
    done = 0
    while done < 5:
        data = os.urandom(4 * (1 + done * 7))
        encrypted = rsa_pad_encrypt(data, os.urandom(32), os.urandom(192 - len(data)))
        if encrypted is None:
            continue
        result = rsa_decrypt_inner_data(KEY, encrypted)
        assert not result.legacy
        assert result.data[: len(data)] == data
        done += 1


# -- hostile input --------------------------------------------------------------------


def test_too_long_input() -> None:
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, b"\0" + RSA_PAD_VECTOR)
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, b"")


def test_value_not_below_modulus() -> None:
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, PUBLIC.n.to_bytes(256, "big"))
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, b"\xff" * 256)


def test_tampered_vectors() -> None:
    for vector in (RSA_PAD_VECTOR, LEGACY_VECTOR):
        tampered = bytearray(vector)
        tampered[100] ^= 1
        with pytest.raises(RsaError):
            rsa_decrypt_inner_data(KEY, bytes(tampered))


def test_legacy_with_wrong_hash() -> None:
    block = b"\0" + bytes(20) + INNER + bytes(235 - len(INNER))
    encrypted = pow(int.from_bytes(block, "big"), PUBLIC.e, PUBLIC.n).to_bytes(256, "big")
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, encrypted)


def test_key_must_be_2048_bits() -> None:
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(small, b"\x01" * 128)


@settings(max_examples=25, deadline=None)
@given(data=st.binary(min_size=1, max_size=300))
def test_garbage_only_raises_rsa_error(data: bytes) -> None:
    with pytest.raises(RsaError):
        rsa_decrypt_inner_data(KEY, data)
