"""The load of ``telesrv bench e2e``: sender/receiver pairs of MTProto clients in separate
processes, and the coordinator's handle on those processes."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import random
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import click

from telesrv.bench._e2e_server import LOGIN_CODE

ACK_BATCH = 64  # content messages acknowledged in one msgs_ack


def _decode(body: bytes) -> Any:
    from telesrv.bench._client import ClientError
    from telesrv.tl import decode, mt

    obj = decode(body)
    if isinstance(obj, mt.RpcError):
        raise ClientError(f"rpc error {obj.error_code} {obj.error_message}")
    return obj


def _text_ids(text: str) -> tuple[int, int] | None:
    """(pair, sequence) of a bench message text, None for any other text."""
    head, _, rest = text.partition(" ")
    if head != "e2e":
        return None
    pair, _, seq = rest.partition(":")
    try:
        return int(pair), int(seq)
    except ValueError:
        return None


class Device:
    """One logged-in device: an auth key, a connection and acknowledgements."""

    def __init__(
        self, host: str, port: int, server_key: Any, phone: str, source: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.server_key = server_key
        self.phone = phone
        self.source = source  # local address to connect from (None: any)
        self.client: Any = None
        self.key: Any = None
        self.user_id = 0
        self._unacked: list[int] = []

    async def call(self, request: Any) -> Any:
        answer = _decode(await self.client.call(request.to_bytes()))
        self.note_received(self.client.received)
        self.client.received.clear()
        return answer

    def note_received(self, messages: Iterable[Any]) -> None:
        """Acknowledge the server's content messages (odd seq_no), a batch at a time."""
        self._unacked.extend(m.msg_id for m in messages if m.seq_no & 1)
        if len(self._unacked) >= ACK_BATCH:
            self.flush_acks()

    def flush_acks(self) -> None:
        from telesrv.tl import mt

        if self._unacked and self.client is not None:
            body = mt.MsgsAck(msg_ids=self._unacked).to_bytes()
            self._unacked = []
            _msg_id, payload = self.client.session.encrypt(body, content=False)
            self.client.conn.send(payload)

    async def log_in(self, code: str = LOGIN_CODE) -> None:
        from telesrv.bench._client import connect_new_key
        from telesrv.tl import LAYER, functions, types

        self.client, self.key = await connect_new_key(
            self.host, self.port, self.server_key, source=self.source
        )
        send_code = functions.auth.SendCode(
            phone_number=self.phone, api_id=1, api_hash="0" * 32, settings=types.CodeSettings()
        )
        sent = await self.call(
            functions.InvokeWithLayer(
                layer=LAYER,
                query=functions.InitConnection(
                    api_id=1, device_model="telesrv bench", system_version="1",
                    app_version="1", system_lang_code="en", lang_pack="", lang_code="en",
                    query=send_code,
                ),
            )
        )  # fmt: skip
        auth = await self.call(
            functions.auth.SignIn(
                phone_number=self.phone,
                phone_code_hash=sent.phone_code_hash,
                phone_code=code,
            )
        )
        self.user_id = auth.user.id

    async def reconnect(self) -> None:
        """A new connection and a new session on the same key (the salt carries over)."""
        from telesrv.bench._client import (
            EncryptedClient,
            EncryptedSession,
            MsgIdClock,
            RawConnection,
        )

        salt = self.client.session.salt
        await self.close()
        conn = await RawConnection.open(self.host, self.port)
        session = EncryptedSession(self.key.auth_key, salt, clock=MsgIdClock(self.key.time_offset))
        self.client = EncryptedClient(conn, session)

    async def close(self) -> None:
        if self.client is not None:
            self.flush_acks()
            await self.client.conn.close()


@dataclass
class Pair:
    index: int
    sender: Device
    receiver: Device
    access_hash: int = 0
    starts: dict[int, float] = field(default_factory=dict)
    arrivals: dict[int, float] = field(default_factory=dict)
    duplicates: int = 0
    send_rtts: list[float] = field(default_factory=list)
    expected: int = 0
    complete: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None
    pending: dict[int, asyncio.Future[bytes]] = field(default_factory=dict)

    def arrived(self, seq: int, at: float) -> None:
        if seq in self.arrivals:
            self.duplicates += 1
            return
        self.arrivals[seq] = at
        if len(self.arrivals) >= self.expected:
            self.complete.set()


def _messages_in(update: Any) -> list[str]:
    """Texts of the new messages an ``updates`` push carries."""
    from telesrv.tl import types

    if isinstance(update, types.UpdateShortMessage):
        return [update.message]
    texts = []
    for u in getattr(update, "updates", None) or []:
        if isinstance(u, types.UpdateNewMessage) and isinstance(u.message, types.Message):
            texts.append(u.message.message)
    return texts


async def _read_pushes(pair: Pair) -> None:
    """The receiver's connection while online: pushes, and answers to its requests."""
    from telesrv.bench._client import rpc_result_of

    device = pair.receiver
    client = device.client
    while True:
        messages = await client.recv_messages()
        now = time.perf_counter()
        client.received.clear()
        for m in messages:
            answer = rpc_result_of(m)
            if answer is not None:
                future = pair.pending.pop(answer[0], None)
                if future is not None and not future.done():
                    future.set_result(answer[1])
                continue
            try:
                update = _decode(m.body)
            except Exception:
                continue  # service messages the bench has no use for
            for text in _messages_in(update):
                ids = _text_ids(text)
                if ids is not None and ids[0] == pair.index:
                    pair.arrived(ids[1], now)
        device.note_received(messages)


async def _receiver_request(pair: Pair, request: Any) -> Any:
    """A request on the receiver's connection while its reader runs."""
    session = pair.receiver.client.session
    msg_id, payload = session.encrypt(request.to_bytes())
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    pair.pending[msg_id] = future
    pair.receiver.client.conn.send(payload)
    return _decode(await asyncio.wait_for(future, 30.0))


class Load:
    def __init__(self, options: dict[str, Any]) -> None:
        from telesrv.bench._client import PublicKey

        self.options = options
        key = PublicKey(options["n"], options["e"])
        host, port = options["host"], options["port"]
        prefix = options["phone_prefix"]
        self.pairs = [
            Pair(
                index,
                Device(host, port, key, f"{prefix}{2 * index:04d}"),
                Device(host, port, key, f"{prefix}{2 * index + 1:04d}"),
            )
            for index in options["pairs"]
        ]
        self.states: dict[int, Any] = {}

    async def setup(self) -> None:
        from telesrv.tl import functions, types

        async def one(pair: Pair) -> None:
            await pair.receiver.log_in()
            await pair.sender.log_in()
            imported = await pair.sender.call(
                functions.contacts.ImportContacts(
                    contacts=[
                        types.InputPhoneContact(
                            client_id=1, phone=pair.receiver.phone, first_name="r", last_name=""
                        )
                    ]
                )
            )
            [user] = [u for u in imported.users if u.id == pair.receiver.user_id]
            pair.access_hash = user.access_hash
            await pair.receiver.call(functions.updates.GetState())  # online from now on
            pair.reader = asyncio.create_task(_read_pushes(pair))

        await asyncio.gather(*(one(p) for p in self.pairs))

    async def _send(self, pair: Pair, first: int, count: int, record: bool) -> None:
        from telesrv.tl import functions, types

        peer = types.InputPeerUser(user_id=pair.receiver.user_id, access_hash=pair.access_hash)
        rng = random.SystemRandom()  # a repeated random_id would be deduplicated
        for seq in range(first, first + count):
            request = functions.messages.SendMessage(
                peer=peer, message=f"e2e {pair.index}:{seq}", random_id=rng.getrandbits(63)
            )
            started = time.perf_counter()
            if record:
                pair.starts[seq] = started
            await pair.sender.call(request)
            if record:
                pair.send_rtts.append(time.perf_counter() - started)

    async def online(self) -> dict[str, Any]:
        n = self.options["messages"]
        for pair in self.pairs:
            pair.expected = n
        started = time.perf_counter()
        await asyncio.gather(*(self._send(p, 0, n, True) for p in self.pairs))
        send_seconds = time.perf_counter() - started
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options["drain_timeout"]):
                await asyncio.gather(*(p.complete.wait() for p in self.pairs))
        push, rtts = [], []
        lost = duplicates = 0
        for pair in self.pairs:
            rtts += pair.send_rtts
            push += [at - pair.starts[seq] for seq, at in pair.arrivals.items()]
            lost += n - len(pair.arrivals)
            duplicates += pair.duplicates
        return {
            "sent": n * len(self.pairs),
            "send_seconds": send_seconds,
            "send_rtts": rtts,
            "push_latencies": push,
            "lost": lost,
            "duplicates": duplicates,
        }

    async def go_offline(self) -> None:
        """Receivers remember their state and disconnect; senders then send to them."""
        from telesrv.tl import functions

        for pair in self.pairs:
            self.states[pair.index] = await _receiver_request(pair, functions.updates.GetState())
            assert pair.reader is not None
            pair.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pair.reader
            pair.reader = None
        await asyncio.gather(*(p.receiver.close() for p in self.pairs))
        n, m = self.options["messages"], self.options["offline_messages"]
        await asyncio.gather(*(self._send(p, n, m, False) for p in self.pairs))

    async def catch_up(self) -> dict[str, Any]:
        from telesrv.tl import functions, types

        n, m = self.options["messages"], self.options["offline_messages"]
        counts: dict[str, float] = {"fetched": 0, "lost": 0, "duplicates": 0, "requests": 0}

        async def one(pair: Pair) -> None:
            await pair.receiver.reconnect()
            state = self.states[pair.index]
            pts, date = state.pts, state.date
            seen: set[int] = set()
            while True:
                diff = await pair.receiver.call(
                    functions.updates.GetDifference(pts=pts, date=date, qts=0)
                )
                counts["requests"] += 1
                if isinstance(diff, types.updates.DifferenceEmpty):
                    break
                for message in getattr(diff, "new_messages", []):
                    ids = _text_ids(getattr(message, "message", ""))
                    if ids is None or ids[0] != pair.index or not n <= ids[1] < n + m:
                        continue
                    counts["fetched"] += 1
                    if ids[1] in seen:
                        counts["duplicates"] += 1
                    seen.add(ids[1])
                if isinstance(diff, types.updates.DifferenceSlice):
                    pts, date = diff.intermediate_state.pts, diff.intermediate_state.date
                    continue
                if isinstance(diff, types.updates.Difference):
                    break
                raise RuntimeError(f"unexpected difference {type(diff).__name__}")
            counts["lost"] += m - len(seen)

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in self.pairs))
        counts["seconds"] = time.perf_counter() - started
        return counts

    async def close(self) -> None:
        for pair in self.pairs:
            if pair.reader is not None:
                pair.reader.cancel()
            for device in (pair.sender, pair.receiver):
                with contextlib.suppress(Exception):
                    await device.close()


async def _client_main(pipe: Connection, options: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    load = Load(options)
    try:
        await load.setup()
        pipe.send(("ready", None))
        while True:
            command = await loop.run_in_executor(None, pipe.recv)
            if command == "online":
                pipe.send(("online", await load.online()))
            elif command == "offline":
                await load.go_offline()
                pipe.send(("offline", None))
            elif command == "catchup":
                pipe.send(("catchup", await load.catch_up()))
            else:
                break
    finally:
        await load.close()


def client_process(pipe: Connection, options: dict[str, Any]) -> None:
    """Entry point of a load process: answers the coordinator's commands in order."""
    try:
        asyncio.run(_client_main(pipe, options))
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
    finally:
        pipe.close()


class Clients:
    """The load processes and their command pipes."""

    def __init__(self, count: int, options: dict[str, Any], pairs: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for index in range(count):
            mine = list(range(index, pairs, count))
            if not mine:
                continue
            ours, theirs = context.Pipe()
            process = context.Process(
                target=client_process, args=(theirs, {**options, "pairs": mine}), daemon=True
            )
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)

    async def _answer(self, pipe: Connection, expected: str) -> Any:
        kind, value = await asyncio.to_thread(pipe.recv)
        if kind == "error":
            raise click.ClickException(f"load process failed:\n{value}")
        if kind != expected:
            raise click.ClickException(f"load process answered {kind!r}, not {expected!r}")
        return value

    async def wait(self, expected: str) -> list[Any]:
        return list(await asyncio.gather(*(self._answer(p, expected) for p in self.pipes)))

    async def command(self, command: str) -> list[Any]:
        for pipe in self.pipes:
            pipe.send(command)
        return await self.wait(command)

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send("stop")
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
