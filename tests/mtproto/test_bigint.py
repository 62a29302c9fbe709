"""powmod: GMP and the CPython fallback agree."""

from __future__ import annotations

import random

import pytest

from telesrv.mtproto import bigint
from telesrv.mtproto.handshake import DH_PRIME


@pytest.mark.parametrize("use_gmp", [True, False])
def test_powmod_matches_builtin_pow(monkeypatch: pytest.MonkeyPatch, use_gmp: bool) -> None:
    if not use_gmp:
        monkeypatch.setattr(bigint, "gmpy2", None)
    elif vars(bigint)["gmpy2"] is None:
        pytest.skip("gmpy2 is not installed")
    rng = random.Random(5)
    for _ in range(20):
        e = rng.getrandbits(320)
        b = rng.randrange(2, DH_PRIME - 1)
        result = bigint.powmod(b, e, DH_PRIME)
        assert result == pow(b, e, DH_PRIME) and type(result) is int
