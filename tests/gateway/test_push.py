"""Gateway.push_to_user: every online session of the owner except the one that caused
the change, identified by auth_key_id AND session_id (one key may carry several sessions)."""

from __future__ import annotations

import asyncio
from typing import Any

from telesrv.gateway.server import Gateway
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.registry import Registry


class FakeConnection:
    def __init__(self) -> None:
        self.sessions: set[Any] = set()


class RecordingSession:
    def __init__(self) -> None:
        self.updates: list[bytes] = []

    def send_update(self, body: bytes) -> None:
        self.updates.append(body)

    def on_reconnect(self) -> None:
        pass

    def flush(self, now: float) -> list[bytes]:
        return []


async def _no_info(*args: Any) -> None:
    return None


def make_gateway() -> Gateway:
    from cryptography.hazmat.primitives.asymmetric import rsa

    gateway = Gateway(
        auth_keys=None,  # type: ignore[arg-type]
        dispatcher=Dispatcher(Registry(), _no_info),
        rsa_key=rsa.generate_private_key(public_exponent=65537, key_size=2048),
        fingerprint=1,
        salt_secret=b"s" * 32,
    )
    gateway.sessions._make_session = lambda *a: RecordingSession()  # type: ignore[assignment]
    return gateway


def online(
    gateway: Gateway, key_id: int, session_id: int, user_id: int, *, wants: bool = True
) -> Any:
    entry = gateway.sessions.attach(b"k", key_id, key_id, session_id, FakeConnection(), 0.0)  # type: ignore[arg-type]
    gateway.sessions.set_user(entry, user_id)
    entry.wants_updates = wants
    return entry


async def test_push_skips_only_the_origin_session() -> None:
    gateway = make_gateway()
    origin = online(gateway, key_id=1, session_id=7, user_id=42)
    same_session_id_other_key = online(gateway, key_id=2, session_id=7, user_id=42)
    other_session_same_key = online(gateway, key_id=1, session_id=8, user_id=42)
    someone_else = online(gateway, key_id=3, session_id=9, user_id=43)
    without_updates = online(gateway, key_id=4, session_id=1, user_id=42, wants=False)
    offline = online(gateway, key_id=5, session_id=1, user_id=42)
    gateway.sessions.detach(offline.connection, 0.0)

    assert gateway.push_to_user(42, b"upd", exclude=(1, 7)) == 2
    await asyncio.sleep(0)  # the coalesced flush runs
    assert origin.session.updates == []
    assert same_session_id_other_key.session.updates == [b"upd"]
    assert other_session_same_key.session.updates == [b"upd"]
    assert someone_else.session.updates == []
    assert without_updates.session.updates == []
    assert offline.session.updates == []
    assert gateway.push_to_user(42, b"all") == 3  # no origin: every online session


async def test_would_push_agrees_with_push_to_user() -> None:
    gateway = make_gateway()
    online(gateway, key_id=1, session_id=7, user_id=42)
    online(gateway, key_id=4, session_id=1, user_id=42, wants=False)
    offline = online(gateway, key_id=5, session_id=1, user_id=42)
    gateway.sessions.detach(offline.connection, 0.0)

    assert not gateway.would_push(42, exclude=(1, 7))  # only the origin would get it
    assert gateway.push_to_user(42, b"upd", exclude=(1, 7)) == 0
    assert gateway.would_push(42)
    assert not gateway.would_push(43)
    online(gateway, key_id=1, session_id=8, user_id=42)
    assert gateway.would_push(42, exclude=(1, 7))
