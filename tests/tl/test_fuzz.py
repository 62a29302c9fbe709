"""Random and mutated inputs: the decoders raise DecodeError or succeed, nothing else.

At least 100,000 inputs per run, built by mutating real serialized objects
(truncation, byte flips, planted constructor ids, huge counts and lengths,
splices) plus plain random bytes. Set TELESRV_FUZZ_SEED to explore other inputs;
a failure prints the seed and the input as hex.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable

from telesrv.tl import CLASSES, DecodeError, decode, functions, service, types
from telesrv.tl.core import GZIP_PACKED_ID, MSG_CONTAINER_ID, VECTOR_ID
from tl.tlgen import COMBINATORS, Builder, Source

SEED = int(os.environ.get("TELESRV_FUZZ_SEED", "229"))
INPUTS = 100_000

INTERESTING_WORDS = [
    0,
    1,
    0xFFFFFFFF,
    0x7FFFFFFF,
    0x80000000,
    VECTOR_ID,
    GZIP_PACKED_ID,
    MSG_CONTAINER_ID,
    0xFEFFFFFF,  # string length marker 254 with a 16 MiB length
    0x000000FE,
    0x000000FF,
]


def seeds(rng: random.Random) -> list[bytes]:
    builder = Builder(Source(rng), max_depth=3, max_vector=2)
    hot = [c for c in COMBINATORS if c.name in ("message", "updates", "user", "config", "dialog")]
    out = [builder.build(c).to_bytes() for c in rng.sample(COMBINATORS, 150)]
    out += [builder.build(c).to_bytes() for c in hot for _ in range(6)]
    update = types.UpdateShortMessage(id=1, user_id=2, message="hi", pts=3, pts_count=1, date=4)
    out.append(service.gzip_packed(update.to_bytes()))
    out.append(functions.InvokeWithLayer(layer=229, query=functions.help.GetConfig()).to_bytes())
    return [s for s in out if len(s) < 4096]  # keep each parse cheap


def mutate(rng: random.Random, data: bytes, ids: list[int], pool: list[bytes]) -> bytes:
    kind = rng.randrange(8)
    buf = bytearray(data)
    if kind == 0:  # truncate
        return bytes(buf[: rng.randrange(len(buf) + 1)])
    if kind == 1:  # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            if buf:
                buf[rng.randrange(len(buf))] = rng.randrange(256)
        return bytes(buf)
    if kind in (2, 3):  # plant a constructor id or an interesting word on a 4-byte boundary
        if len(buf) >= 4:
            at = rng.randrange(len(buf) // 4) * 4
            word = rng.choice(ids) if kind == 2 else rng.choice(INTERESTING_WORDS)
            buf[at : at + 4] = struct.pack("<I", word)
        return bytes(buf)
    if kind == 4:  # splice the head of one object onto the tail of another
        other = rng.choice(pool)
        return bytes(buf[: rng.randrange(len(buf) + 1)] + other[rng.randrange(len(other) + 1) :])
    if kind == 5:  # delete or duplicate a slice
        a = rng.randrange(len(buf) + 1)
        b = rng.randrange(a, len(buf) + 1)
        return bytes(buf[:a] + buf[b:]) if rng.random() < 0.5 else bytes(buf[:b] + buf[a:])
    if kind == 6:  # a known constructor followed by noise
        noise = rng.randbytes(rng.randrange(64))
        return struct.pack("<I", rng.choice(ids)) + noise
    return rng.randbytes(rng.randrange(48))  # pure noise


def container_of(rng: random.Random, pool: list[bytes]) -> bytes:
    items = [
        service.ContainerItem(rng.getrandbits(63), rng.randrange(100), rng.choice(pool))
        for _ in range(rng.randint(0, 4))
    ]
    return service.encode_container(items)


def run_one(fn: Callable[[bytes], object], data: bytes) -> None:
    try:
        fn(data)
    except DecodeError:
        pass
    except Exception as e:  # the property under test: nothing else may escape
        raise AssertionError(
            f"{fn.__name__} raised {type(e).__name__}: {e} (seed {SEED}) on {data.hex()}"
        ) from e


def decode_loose(data: bytes) -> object:
    return decode(data, exact=False)


def decode_result_of_get_contact_ids(data: bytes) -> object:
    return service.decode_result(functions.contacts.GetContactIDs(hash=0), data)


def test_mutated_and_random_inputs_raise_only_decode_error() -> None:
    rng = random.Random(SEED)
    pool = seeds(rng)
    for s in pool:
        decode(s)  # the seeds themselves are valid
    ids = list(CLASSES)
    containers = [container_of(rng, pool) for _ in range(50)]
    decoders: list[Callable[[bytes], object]] = [decode, decode_loose]
    for i in range(INPUTS):
        if i % 10 == 0:
            data = mutate(rng, rng.choice(containers), ids, containers)
            run_one(service.decode_container, data)
            run_one(service.unwrap_gzip, data)
        elif i % 10 == 1:
            run_one(decode_result_of_get_contact_ids, mutate(rng, rng.choice(pool), ids, pool))
        else:
            run_one(decoders[i & 1], mutate(rng, rng.choice(pool), ids, pool))
