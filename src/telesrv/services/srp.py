"""The server's half of Telegram's two-step verification: SRP-6a over a 2048-bit group.

Sans-io: randomness comes in as arguments, nothing here stores or sends anything.

The client derives ``x`` from the password and two salts (SHA-256 and PBKDF2-HMAC-SHA512,
100,000 rounds; :func:`password_hash`) and sends the server only the verifier
``v = g^x mod p``. To check a password later the server draws a secret ``b`` and offers
``B = k*v + g^b``; the client answers ``A = g^a`` and a proof ``M1`` that only someone
who knows ``x`` can compute. The server rebuilds the shared secret from ``A``, ``v`` and
``b`` and compares proofs, so neither the password nor ``x`` ever reaches it.

Every number that enters a hash is written big-endian, padded to 256 bytes.
"""

from __future__ import annotations

import hashlib
import hmac

try:
    import gmpy2
except ImportError:  # pragma: no cover - gmpy2 is a declared dependency
    gmpy2 = None

# The group clients accept without testing it (they compare the prime byte for byte and
# take g = 3, 4, 5 or 7 with it): the 2048-bit safe prime of the MTProto key exchange.
P = int(
    "C71CAEB9C6B1C9048E6C522F70F13F73980D40238E3E21C14934D037563D930F"
    "48198A0AA7C14058229493D22530F4DBFA336F6E0AC925139543AED44CCE7C37"
    "20FD51F69458705AC68CD4FE6B6B13ABDC9746512969328454F18FAF8C595F64"
    "2477FE96BB2A941D5BCD1D4AC8CC49880708FA9B378E3C4F3A9060BEE67CF9A4"
    "A4A695811051907E162753B56B0F6B410DBA74D8A84B2A14B3144E0EF1284754"
    "FD17ED950D5965B4B9DD46582DB1178D169C6BC465B0D6FF9CA3928FEF5B9AE4"
    "E418FC15E83EBEA0F87FA9FF5EED70050DED2849F47BF959D956850CE929851F"
    "0D8115F635B105EE2E4E15D04B2454BF6F4FADF034B10403119CD8E3B92FCC5B",
    16,
)
G = 3
SIZE = 256  # bytes of every number on the wire and in the hashes
P_BYTES = P.to_bytes(SIZE, "big")
PBKDF2_ROUNDS = 100_000
# A public value within 2^1984 of 0 or of p is refused by clients (a weak exponent or a
# forged value); the server holds the client's A to the same test.
_MARGIN_BITS = 2048 - 64


def _h(*parts: bytes) -> bytes:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.digest()


def pad(n: int) -> bytes:
    return n.to_bytes(SIZE, "big")


def powmod(base: int, exponent: int, modulus: int) -> int:
    if gmpy2 is not None:
        return int(gmpy2.powmod(base, exponent, modulus))
    return pow(base, exponent, modulus)


# k = H(p | g): the SRP-6a multiplier, fixed by the group.
K_MULTIPLIER = int.from_bytes(_h(P_BYTES, pad(G)), "big")


def password_hash(password: bytes, salt1: bytes, salt2: bytes) -> bytes:
    """x as bytes: what a client derives from the password (the server never needs it;
    tests and tools that play the client do)."""
    inner = _h(salt2, _h(salt1, password, salt1), salt2)
    stretched = hashlib.pbkdf2_hmac("sha512", inner, salt1, PBKDF2_ROUNDS)
    return _h(salt2, stretched, salt2)


def verifier_of(password: bytes, salt1: bytes, salt2: bytes) -> bytes:
    """v = g^x mod p, padded: what a client sends as new_password_hash."""
    return pad(powmod(G, int.from_bytes(password_hash(password, salt1, salt2), "big"), P))


def valid_verifier(value: bytes) -> bool:
    """A new_password_hash the server may store: a number of the group, not 0, 1 or p-1
    (those would accept a proof made without the password)."""
    if not value or len(value) > SIZE:
        return False
    v = int.from_bytes(value, "big")
    return 1 < v < P - 1


def _good_public(value: int) -> bool:
    return (
        0 < value < P
        and value.bit_length() >= _MARGIN_BITS
        and (P - value).bit_length() >= _MARGIN_BITS
    )


def server_public(verifier: bytes, b: int) -> bytes | None:
    """B = k*v + g^b mod p for the secret ``b``; None when this ``b`` gives a g^b that
    clients refuse (draw another)."""
    g_b = powmod(G, b, P)
    if not _good_public(g_b):
        return None
    big_b = (K_MULTIPLIER * int.from_bytes(verifier, "big") + g_b) % P
    if big_b == 0:
        return None
    return pad(big_b)


def proof(salt1: bytes, salt2: bytes, a: bytes, big_b: bytes, secret: int) -> bytes:
    """M1 = H(H(p) xor H(g) | H(salt1) | H(salt2) | A | B | H(S))."""
    hp, hg = _h(P_BYTES), _h(pad(G))
    return _h(
        bytes(x ^ y for x, y in zip(hp, hg, strict=True)),
        _h(salt1),
        _h(salt2),
        a,
        big_b,
        _h(pad(secret)),
    )


def check(
    *,
    verifier: bytes,
    salt1: bytes,
    salt2: bytes,
    b: int,
    big_b: bytes,
    a: bytes,
    m1: bytes,
) -> bool:
    """Whether the client's A and M1 prove knowledge of the password behind ``verifier``
    for the exchange whose secret was ``b`` (and public value ``big_b``)."""
    if not a or len(a) > SIZE or len(m1) != 32:
        return False
    a_int = int.from_bytes(a, "big")
    if not _good_public(a_int):
        return False
    a_padded = pad(a_int)
    u = int.from_bytes(_h(a_padded, big_b), "big")
    if u == 0:
        return False
    v = int.from_bytes(verifier, "big")
    # S = (A * v^u)^b: the client reaches the same value as (B - k*g^x)^(a + u*x).
    secret = powmod(a_int * powmod(v, u, P) % P, b, P)
    return hmac.compare_digest(proof(salt1, salt2, a_padded, big_b, secret), m1)
