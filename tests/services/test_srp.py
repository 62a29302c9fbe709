"""The SRP math of two-step verification against an independent implementation: Telethon's
client side (``telethon.password``) makes the verifier and the proofs, ours checks them."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from telethon import password as client_side
from telethon.tl import types as ttypes

from telesrv.mtproto.handshake import DH_PRIME
from telesrv.services import srp

SALT1 = bytes(range(40))  # 8 bytes of the server's, 32 of the client's, as apps make it
SALT2 = bytes(range(100, 116))
PASSWORD = "hunter2 ünïcode"
B_SECRET = int.from_bytes(hashlib.sha512(b"server secret").digest() * 4, "big")
A_RANDOM = hashlib.sha512(b"client secret").digest() * 4  # 256 bytes: the client's a


def algo(salt1: bytes = SALT1, salt2: bytes = SALT2) -> Any:
    return ttypes.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
        salt1=salt1, salt2=salt2, g=srp.G, p=srp.P_BYTES
    )


def offered(big_b: bytes) -> Any:
    """account.password as a client receives it for the exchange offering ``big_b``."""
    return ttypes.account.Password(
        new_algo=ttypes.PasswordKdfAlgoUnknown(),
        new_secure_algo=ttypes.SecurePasswordKdfAlgoUnknown(),
        secure_random=b"",
        has_password=True,
        current_algo=algo(),
        srp_B=big_b,
        srp_id=1,
    )


def client_check(big_b: bytes, password: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    # The client's random a, fixed: the proof is then one exact value.
    monkeypatch.setattr(client_side.os, "urandom", lambda n: A_RANDOM[:n])
    return client_side.compute_check(offered(big_b), password)


def test_the_group_is_the_one_clients_take_without_testing() -> None:
    assert srp.P == DH_PRIME and srp.P.bit_length() == 2048 and len(srp.P_BYTES) == 256
    client_side.check_prime_and_good(srp.P_BYTES, srp.G)  # raises on a group it refuses


def test_the_verifier_is_the_one_the_client_makes() -> None:
    made_by_client = client_side.compute_digest(algo(), PASSWORD)
    assert srp.verifier_of(PASSWORD.encode(), SALT1, SALT2) == made_by_client
    assert len(made_by_client) == srp.SIZE
    assert srp.password_hash(PASSWORD.encode(), SALT1, SALT2) == client_side.compute_hash(
        algo(), PASSWORD
    )


def test_an_exact_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = client_side.compute_digest(algo(), PASSWORD)
    big_b = srp.server_public(verifier, B_SECRET)
    assert big_b is not None
    # B = k*v + g^b mod p, computed here without the module's helpers.
    k = int.from_bytes(hashlib.sha256(srp.P_BYTES + (3).to_bytes(256, "big")).digest(), "big")
    expected = (k * int.from_bytes(verifier, "big") + pow(3, B_SECRET, srp.P)) % srp.P
    assert big_b == expected.to_bytes(256, "big")

    check = client_check(big_b, PASSWORD, monkeypatch)
    # Pinned: the client's A and proof for these inputs (a fixed a), so that a change
    # in how either side hashes shows here and not only as a failed login.
    assert hashlib.sha256(check.A).hexdigest()[:16] == "f3716efe696cc430"
    assert check.M1.hex() == "fa3bc86d8215a2edff2d0707df46525b7e1f9df81ff138e6ac08793f19750429"
    assert srp.check(
        verifier=verifier, salt1=SALT1, salt2=SALT2, b=B_SECRET, big_b=big_b, a=check.A, m1=check.M1
    )


def test_a_wrong_password_or_a_forged_proof_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = srp.verifier_of(PASSWORD.encode(), SALT1, SALT2)
    big_b = srp.server_public(verifier, B_SECRET)
    assert big_b is not None
    common: dict[str, Any] = dict(
        verifier=verifier, salt1=SALT1, salt2=SALT2, b=B_SECRET, big_b=big_b
    )
    wrong = client_check(big_b, PASSWORD + "x", monkeypatch)
    assert not srp.check(**common, a=wrong.A, m1=wrong.M1)
    right = client_check(big_b, PASSWORD, monkeypatch)
    assert srp.check(**common, a=right.A, m1=right.M1)
    flipped = bytes([right.M1[0] ^ 1]) + right.M1[1:]
    assert not srp.check(**common, a=right.A, m1=flipped)
    assert not srp.check(**common, a=right.A, m1=right.M1[:31])
    # A public value a client could pick to force the shared secret: refused outright.
    for forged in (0, 1, 2, srp.P - 1, srp.P, srp.P + 1):
        assert not srp.check(**common, a=srp.pad(forged) if forged < 2**2048 else b"", m1=right.M1)
    assert not srp.check(**common, a=b"\x01" + right.A, m1=right.M1)  # 257 bytes
    assert not srp.check(**common, a=b"", m1=right.M1)


def test_secrets_whose_g_b_clients_refuse_are_not_offered() -> None:
    verifier = srp.verifier_of(b"x", SALT1, SALT2)
    assert srp.server_public(verifier, 0) is None  # g^0 = 1
    assert srp.server_public(verifier, 1) is None  # g^1 = 3
    assert srp.server_public(verifier, B_SECRET) is not None


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (b"", False),
        (srp.pad(0), False),
        (srp.pad(1), False),
        (srp.pad(srp.P - 1), False),
        (srp.pad(srp.P), False),
        (b"\x00" + srp.pad(2), False),  # 257 bytes: one past the size
        (srp.pad(2), True),
        (srp.pad(srp.P - 2), True),
        (b"\x05", True),  # short forms are numbers too
    ],
)
def test_which_verifiers_may_be_stored(value: bytes, valid: bool) -> None:
    assert srp.valid_verifier(value) is valid
