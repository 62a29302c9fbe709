"""The client of ``telesrv bench media``: one logged-in device in its own process that
uploads a document in parallel big-file parts, finishes it with messages.uploadMedia and
downloads it again with upload.getFile, several requests in flight on one connection."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import random
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import click

from telesrv.bench._e2e_load import Device

# What an answer future gets when the server asks for the request again (new salt).
_RESEND = b""
# Bool answers are bare constructors, not objects the TL decoder reads.
_BOOL_TRUE = (0x997275B5).to_bytes(4, "little")


class Pipeline:
    """Requests on one device's connection with many in flight: a reader task hands each
    answer to the request that waits for it."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from telesrv.bench._client import ClientError, rpc_result_of
        from telesrv.tl import decode, mt

        client = self.device.client
        try:
            while True:
                messages = await client.recv_messages()
                client.received.clear()
                for m in messages:
                    answer = rpc_result_of(m)
                    if answer is not None:
                        self._resolve(answer[0], answer[1])
                        continue
                    cid = m.constructor
                    if cid in (
                        mt.BadServerSalt.CONSTRUCTOR_ID,
                        mt.BadMsgNotification.CONSTRUCTOR_ID,
                    ):
                        notice: Any = decode(m.body)
                        if cid == mt.BadServerSalt.CONSTRUCTOR_ID:
                            self._resolve(notice.bad_msg_id, _RESEND)
                        else:
                            error = ClientError(f"bad_msg_notification {notice.error_code}")
                            self._fail(notice.bad_msg_id, error)
                self.device.note_received(messages)
        except BaseException as exc:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ClientError(f"connection lost: {exc!r}"))
            self.pending.clear()
            raise

    def _resolve(self, msg_id: int, body: bytes) -> None:
        future = self.pending.pop(msg_id, None)
        if future is not None and not future.done():
            future.set_result(body)

    def _fail(self, msg_id: int, error: Exception) -> None:
        future = self.pending.pop(msg_id, None)
        if future is not None and not future.done():
            future.set_exception(error)

    async def call(self, request: Any) -> Any:
        from telesrv.bench._client import ClientError
        from telesrv.bench._e2e_load import _decode

        body = request.to_bytes()
        client = self.device.client
        for _attempt in range(3):
            msg_id, payload = client.session.encrypt(body)
            future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
            self.pending[msg_id] = future
            client.conn.send(payload)
            await client.conn.writer.drain()
            answer = await future
            if answer is not _RESEND:
                return True if answer == _BOOL_TRUE else _decode(answer)
        raise ClientError("server keeps rejecting the salt")

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader


async def _bounded(count: int, parallel: int, job: Any) -> None:
    """``job(i)`` for i in 0..count-1, at most ``parallel`` at a time, in order of i."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            await job(index)

    await asyncio.gather(*(worker() for _ in range(min(parallel, count))))


class MediaLoad:
    def __init__(self, options: dict[str, Any]) -> None:
        from telesrv.bench._client import PublicKey

        self.options = options
        key = PublicKey(options["n"], options["e"])
        self.device = Device(options["host"], options["port"], key, options["phone"])
        self.pipeline: Pipeline | None = None
        # The document: random bytes (incompressible), made once, hashed once.
        self.content = os.urandom(options["size"])
        self.sha256 = hashlib.sha256(self.content).hexdigest()
        self.document: Any = None

    async def setup(self) -> None:
        await self.device.log_in()
        self.pipeline = Pipeline(self.device)

    async def upload(self) -> dict[str, Any]:
        from telesrv.tl import functions, types

        assert self.pipeline is not None
        call = self.pipeline.call
        part_size = self.options["part_size"]
        size = len(self.content)
        total = max(1, -(-size // part_size))
        file_id = random.SystemRandom().getrandbits(63)
        view = memoryview(self.content)

        async def one(part: int) -> None:
            data = bytes(view[part * part_size : (part + 1) * part_size])
            ok = await call(
                functions.upload.SaveBigFilePart(
                    file_id=file_id, file_part=part, file_total_parts=total, bytes=data
                )
            )
            if ok is not True:
                raise RuntimeError(f"saveBigFilePart answered {ok!r}")

        started = time.perf_counter()
        await _bounded(total, self.options["parallel"], one)
        parts_done = time.perf_counter()
        media = await call(
            functions.messages.UploadMedia(
                peer=types.InputPeerSelf(),
                media=types.InputMediaUploadedDocument(
                    file=types.InputFileBig(id=file_id, parts=total, name="bench.bin"),
                    mime_type="application/octet-stream",
                    attributes=[types.DocumentAttributeFilename(file_name="bench.bin")],
                ),
            )
        )
        finished = time.perf_counter()
        if not isinstance(media, types.MessageMediaDocument):
            raise RuntimeError(f"uploadMedia answered {type(media).__name__}")
        self.document = media.document
        return {
            "parts": total,
            "seconds": finished - started,
            "parts_seconds": parts_done - started,
            "finish_seconds": finished - parts_done,
            "document_size": self.document.size,
        }

    async def download(self) -> dict[str, Any]:
        from telesrv.tl import functions, types

        assert self.pipeline is not None
        call = self.pipeline.call
        document = self.document
        location = types.InputDocumentFileLocation(
            id=document.id,
            access_hash=document.access_hash,
            file_reference=document.file_reference,
            thumb_size="",
        )
        chunk = self.options["chunk_size"]
        size = document.size
        count = max(1, -(-size // chunk))
        pieces: list[bytes] = [b""] * count

        async def one(index: int) -> None:
            answer = await call(
                functions.upload.GetFile(location=location, offset=index * chunk, limit=chunk)
            )
            pieces[index] = answer.bytes

        started = time.perf_counter()
        await _bounded(count, self.options["parallel"], one)
        seconds = time.perf_counter() - started
        digest = hashlib.sha256()
        received = 0
        for piece in pieces:
            digest.update(piece)
            received += len(piece)
        return {
            "requests": count,
            "seconds": seconds,
            "bytes": received,
            "corrupt": int(digest.hexdigest() != self.sha256 or received != len(self.content)),
        }

    async def close(self) -> None:
        if self.pipeline is not None:
            await self.pipeline.close()
        with contextlib.suppress(Exception):
            await self.device.close()


async def _client_main(pipe: Connection, options: dict[str, Any]) -> None:
    loop = asyncio.get_running_loop()
    load = MediaLoad(options)
    try:
        await load.setup()
        pipe.send(("ready", None))
        while True:
            command = await loop.run_in_executor(None, pipe.recv)
            if command == "upload":
                pipe.send(("upload", await load.upload()))
            elif command == "download":
                pipe.send(("download", await load.download()))
            else:
                break
    finally:
        await load.close()


def client_process(pipe: Connection, options: dict[str, Any]) -> None:
    """Entry point of the client process: answers the coordinator's commands in order."""
    try:
        asyncio.run(_client_main(pipe, options))
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
    finally:
        pipe.close()


class MediaClient:
    """The client process and its command pipe."""

    def __init__(self, options: dict[str, Any]) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, theirs = context.Pipe()
        self.process = context.Process(target=client_process, args=(theirs, options), daemon=True)
        self.process.start()
        theirs.close()

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None  # started in __init__
        return pid

    async def wait(self, expected: str) -> Any:
        kind, value = await asyncio.to_thread(self.pipe.recv)
        if kind == "error":
            raise click.ClickException(f"client process failed:\n{value}")
        if kind != expected:
            raise click.ClickException(f"client process answered {kind!r}, not {expected!r}")
        return value

    async def command(self, command: str) -> Any:
        self.pipe.send(command)
        return await self.wait(command)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.pipe.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
