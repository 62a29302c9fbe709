"""``telesrv bench tl``: our TL codec against Telethon's on the same objects.

Both codecs run in this process on the same Message and the same Updates (two
updates and a user); each figure is the best of several ``timeit`` repeats.
Ratios are Telethon's time divided by ours, so 2.0 means twice as fast.
Telethon is a test-only dependency and is imported only when this runs.

The same objects are also sent to clients at older layers: 133 (the oldest we
serve), 198 (GramJS) and 213 (Telegram Web K). ``downgrade_N`` is convert +
serialize of the object an RPC answers with, ``push_N`` re-encodes an already
serialized push (parse, convert, serialize). Their ``cost`` is the time relative to
serializing at our layer, which takes no detour.
"""

from __future__ import annotations

import json
import logging
import timeit
from collections.abc import Callable
from types import ModuleType
from typing import Any

import click

from telesrv.tl import TLObject, decode, types
from telesrv.tl.layers import downgrade, downgrade_bytes

OLD_LAYERS = (133, 198, 213)

# Field names that Telethon spells differently from the schema (ours add "_").
_TELETHON_NAMES = {"self_": "is_self"}


def telethon_field_name(name: str) -> str:
    return _TELETHON_NAMES.get(name, name)


def load_telethon() -> ModuleType:
    """Telethon's id -> class table, or a clear error when Telethon is absent."""
    # Telethon logs a line about cryptg on import; keep the output to table + JSON.
    logging.getLogger("telethon").setLevel(logging.WARNING)
    try:
        from telethon.tl import alltlobjects
    except ImportError as exc:
        raise click.ClickException(
            "telesrv bench tl compares against Telethon, which is not installed "
            "(pip install -e '.[test]')"
        ) from exc
    module: ModuleType = alltlobjects
    return module


def to_telethon(value: Any, tlobjects: dict[int, type] | None = None) -> Any:
    """The Telethon object with the same constructor and field values as ``value``."""
    if tlobjects is None:
        tlobjects = load_telethon().tlobjects
    if isinstance(value, TLObject):
        cls = _generated_class(tlobjects[value.CONSTRUCTOR_ID])
        kwargs = {
            telethon_field_name(f): to_telethon(getattr(value, f), tlobjects) for f in value.FIELDS
        }
        return cls(**kwargs)
    if isinstance(value, list):
        return [to_telethon(v, tlobjects) for v in value]
    return value


def _generated_class(cls: type) -> type:
    """Telethon's plain generated class: its patched Message drops MessageMediaEmpty."""
    for klass in cls.__mro__:
        if klass.__module__.startswith(("telethon.tl.types", "telethon.tl.functions")):
            return klass
    return cls


def sample_message() -> types.Message:
    """A private text message as a server sends it: entities, a reply and a forward header."""
    return types.Message(
        id=48213,
        out=True,
        peer_id=types.PeerUser(user_id=5_000_000_123),
        from_id=types.PeerUser(user_id=5_000_000_042),
        date=1_733_000_000,
        message="Meeting moved to 15:30 — see https://example.org/agenda and ping @alice 👍",
        entities=[
            types.MessageEntityBold(offset=0, length=7),
            types.MessageEntityUrl(offset=38, length=26),
            types.MessageEntityMention(offset=74, length=6),
        ],
        reply_to=types.MessageReplyHeader(reply_to_msg_id=48190, quote=False),
        fwd_from=types.MessageFwdHeader(
            from_id=types.PeerUser(user_id=5_000_000_777), date=1_732_990_000
        ),
        edit_date=1_733_000_060,
        ttl_period=None,
    )


def sample_user() -> types.User:
    return types.User(
        id=5_000_000_042,
        contact=True,
        mutual_contact=True,
        access_hash=-7_261_911_301_334_512_345,
        first_name="Alice",
        last_name="Émile",
        username="alice",
        phone="15551230042",
        status=types.UserStatusOnline(expires=1_733_000_300),
        photo=types.UserProfilePhoto(photo_id=6_001_002_003_004, dc_id=2),
        lang_code="en",
    )


def sample_updates() -> types.Updates:
    """``updates`` carrying a new message and a read-outbox update, with the sender."""
    return types.Updates(
        updates=[
            types.UpdateNewMessage(message=sample_message(), pts=9141, pts_count=1),
            types.UpdateReadHistoryOutbox(
                peer=types.PeerUser(user_id=5_000_000_042), max_id=48213, pts=9142, pts_count=1
            ),
        ],
        users=[sample_user()],
        chats=[],
        date=1_733_000_061,
        seq=0,
    )


def best_times_us(
    fns: dict[str, Callable[[], object]], number: int, repeat: int
) -> dict[str, float]:
    """Microseconds per call of each function: the best of ``repeat`` runs of ``number``
    calls. The runs of all functions are interleaved, so a burst of load elsewhere on
    the machine slows ours and Telethon's alike instead of skewing one ratio."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            best[name] = min(best[name], timeit.timeit(fn, number=number))
    return {name: seconds / number * 1e6 for name, seconds in best.items()}


def run(number: int, repeat: int) -> dict[str, float]:
    alltlobjects = load_telethon()
    from telethon.extensions import BinaryReader

    def telethon_parse(data: bytes) -> Callable[[], object]:
        return lambda: BinaryReader(data).tgread_object()

    results: dict[str, float] = {}
    for name, ours in (("message", sample_message()), ("updates", sample_updates())):
        theirs = to_telethon(ours, alltlobjects.tlobjects)
        data = ours.to_bytes()
        if bytes(theirs) != data:
            raise click.ClickException(f"{name}: Telethon serializes different bytes")
        if decode(data) != ours:
            raise click.ClickException(f"{name}: our parser does not round-trip")
        timings = best_times_us(
            {
                "serialize_ours_us": ours.to_bytes,
                "serialize_telethon_us": theirs.__bytes__,
                "parse_ours_us": lambda d=data: decode(d),  # type: ignore[misc]
                "parse_telethon_us": telethon_parse(data),
            },
            number,
            repeat,
        )
        conversions: dict[str, Callable[[], object]] = {}
        for layer in OLD_LAYERS:
            conversions[f"downgrade_{layer}_us"] = lambda o=ours, v=layer: downgrade(  # type: ignore[misc]
                o, v
            ).to_bytes()
            conversions[f"push_{layer}_us"] = lambda d=data, v=layer: downgrade_bytes(d, v)  # type: ignore[misc]
        timings.update(best_times_us(conversions, number, repeat))
        for key, value in timings.items():
            results[f"{name}_{key}"] = round(value, 3)
        for layer in OLD_LAYERS:
            for op in (f"downgrade_{layer}", f"push_{layer}"):
                cost = timings[f"{op}_us"] / timings["serialize_ours_us"]
                results[f"{name}_{op}_cost"] = round(cost, 2)
        for op in ("serialize", "parse"):
            ratio = timings[f"{op}_telethon_us"] / timings[f"{op}_ours_us"]
            results[f"{name}_{op}_speedup"] = round(ratio, 2)
        results[f"{name}_bytes"] = len(data)
    return results


@click.command("tl")
@click.option("--number", default=2000, show_default=True, help="Calls per timing run.")
@click.option("--repeat", default=25, show_default=True, help="Timing runs; the best counts.")
def command(number: int, repeat: int) -> None:
    """Serialize and parse speed of our TL codec against Telethon's (ratio: theirs/ours)."""
    results = run(number, repeat)
    click.echo(f"{'object':<10}{'op':<11}{'ours µs':>10}{'telethon µs':>13}{'speedup':>9}")
    for name in ("message", "updates"):
        for op in ("serialize", "parse"):
            click.echo(
                f"{name:<10}{op:<11}{results[f'{name}_{op}_ours_us']:>10.2f}"
                f"{results[f'{name}_{op}_telethon_us']:>13.2f}"
                f"{results[f'{name}_{op}_speedup']:>8.2f}x"
            )
    click.echo("\nolder layers: µs per object, and relative to serializing at ours")
    for name in ("message", "updates"):
        for layer in OLD_LAYERS:
            for op in (f"downgrade_{layer}", f"push_{layer}"):
                click.echo(
                    f"{name:<10}{op:<15}{results[f'{name}_{op}_us']:>8.2f}"
                    f"{results[f'{name}_{op}_cost']:>8.2f}x"
                )
    ordered = {k: results[k] for k in sorted(results, key=lambda k: ("speedup" not in k, k))}
    click.echo(json.dumps(ordered))
