"""``telesrv bench media``: upload and download throughput through MTProto.

The server runs as a ``telesrv serve`` subprocess (on PostgreSQL and Redis started here
in a temporary directory unless URLs are given); the client is one separate process
speaking MTProto with telesrv's own small client (:mod:`telesrv.bench._client`).

- Upload: a document of ``--size-mb`` random bytes goes up in ``--part-kib`` parts with
  upload.saveBigFilePart, ``--parallel`` requests in flight on one connection, and is
  finished with messages.uploadMedia (inputMediaUploadedDocument): the server then
  hashes the parts into its blob store. The upload figures include that step.
- Download: the document comes back with upload.getFile in ``--chunk-kib`` chunks,
  ``--parallel`` in flight; its SHA-256 must equal the upload's (``corrupt``: 0).
- For each direction: MB/s and the CPU seconds the server used per MB (the telesrv
  process and its PostgreSQL and Redis processes, from /proc).
- The ceiling: AES-256-IGE of telesrv's crypto (cryptg) on one core in this process,
  MB/s of encrypting and of decrypting, and of both (every byte a transfer moves is
  decrypted on one side and encrypted on the other).

The last line is one JSON object with the figures (MB means 10^6 bytes).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from telesrv.bench._e2e_server import database_pids, databases, serve
from telesrv.bench._media_load import MediaClient
from telesrv.bench._proc_cpu import ServerCpu, cpu_seconds

MB = 1_000_000
KIB = 1024
# The AES measurement: this much data in pieces of the size of one upload part.
AES_PIECE = 512 * KIB
AES_MIN_SECONDS = 0.5
MAX_PARTS = 4000  # what upload.saveBigFilePart accepts


def aes_ige_ceiling(
    piece: int = AES_PIECE, min_seconds: float = AES_MIN_SECONDS
) -> dict[str, float]:
    """MB/s of AES-256-IGE encryption and decryption (cryptg) on this core."""
    from telesrv.mtproto import crypto

    data = os.urandom(piece)
    key, iv = os.urandom(32), os.urandom(32)
    crypto.aes_ige_decrypt(crypto.aes_ige_encrypt(data, key, iv), key, iv)  # warm up

    def rate(job: Any, payload: bytes) -> float:
        rounds = 0
        started = time.perf_counter()
        while True:
            job(payload, key, iv)
            rounds += 1
            elapsed = time.perf_counter() - started
            if elapsed >= min_seconds:
                return rounds * len(payload) / MB / elapsed

    encrypt = rate(crypto.aes_ige_encrypt, data)
    decrypt = rate(crypto.aes_ige_decrypt, crypto.aes_ige_encrypt(data, key, iv))
    return {
        "encrypt": encrypt,
        "decrypt": decrypt,
        # One MB encrypted and decrypted: the time of both.
        "both": 1 / (1 / encrypt + 1 / decrypt),
    }


def check_part_count(size: int, part_size: int) -> None:
    """The document must fit the server's 4,000 parts."""
    if -(-size // part_size) > MAX_PARTS:
        raise click.BadParameter("more than 4,000 parts: use bigger parts", param_hint="--size-mb")


def _per_mb(cpu: float, size: int) -> float:
    return round(cpu / (size / MB), 5)


async def run(
    *,
    size: int,
    part_size: int,
    chunk_size: int,
    parallel: int,
    database_url: str | None,
    redis_url: str | None,
    serve_args: tuple[str, ...],
) -> dict[str, Any]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    aes = aes_ige_ceiling()
    with tempfile.TemporaryDirectory(prefix="telesrv-bench-media-") as tmp:
        work = Path(tmp)
        async with (
            databases(database_url, redis_url, work) as (db_url, r_url),
            serve(db_url, r_url, work, serve_args) as (process, host, port),
        ):
            pem = (work / "data" / "server_key.pub.pem").read_bytes()
            public_key = serialization.load_pem_public_key(pem)
            assert isinstance(public_key, rsa.RSAPublicKey)
            numbers = public_key.public_numbers()
            postmaster, redis_pid = await database_pids(db_url, r_url)
            roots = [process.pid] + [p for p in (postmaster, redis_pid) if p is not None]
            cpu = ServerCpu(roots)
            client = MediaClient(
                {
                    "host": host,
                    "port": port,
                    "n": numbers.n,
                    "e": numbers.e,
                    # A fresh number every run: a given database may hold earlier accounts.
                    "phone": f"999{random.randrange(10**7):07d}",
                    "size": size,
                    "part_size": part_size,
                    "chunk_size": chunk_size,
                    "parallel": parallel,
                }
            )
            try:
                await client.wait("ready")
                split, client_before = cpu.split(), cpu_seconds([client.pid])
                up = await client.command("upload")
                up_split = [b - a for a, b in zip(split, cpu.split(), strict=True)]
                up_client_cpu = cpu_seconds([client.pid]) - client_before
                split, client_before = cpu.split(), cpu_seconds([client.pid])
                down = await client.command("download")
                down_split = [b - a for a, b in zip(split, cpu.split(), strict=True)]
                down_client_cpu = cpu_seconds([client.pid]) - client_before
            finally:
                client.close()
    up_cpu, down_cpu = sum(up_split), sum(down_split)
    return {
        "bench": "media",
        "size_bytes": size,
        "part_kib": part_size // KIB,
        "chunk_kib": chunk_size // KIB,
        "parallel": parallel,
        "upload_parts": up["parts"],
        "upload_mb_per_s": round(size / MB / up["seconds"], 2),
        "upload_parts_mb_per_s": round(size / MB / up["parts_seconds"], 2),
        "upload_finish_s": round(up["finish_seconds"], 3),
        "upload_server_cpu_s": round(up_cpu, 3),
        "upload_server_cpu_s_per_mb": _per_mb(up_cpu, size),
        # The server CPU by process tree: telesrv, then PostgreSQL, Redis.
        "upload_server_cpu_split_s": [round(v, 3) for v in up_split],
        "upload_client_cpu_s": round(up_client_cpu, 3),
        "download_requests": down["requests"],
        "download_mb_per_s": round(size / MB / down["seconds"], 2),
        "download_server_cpu_s": round(down_cpu, 3),
        "download_server_cpu_s_per_mb": _per_mb(down_cpu, size),
        "download_server_cpu_split_s": [round(v, 3) for v in down_split],
        "download_client_cpu_s": round(down_client_cpu, 3),
        "aes_ige_mb_per_s": round(aes["both"], 1),
        "aes_ige_encrypt_mb_per_s": round(aes["encrypt"], 1),
        "aes_ige_decrypt_mb_per_s": round(aes["decrypt"], 1),
        "corrupt": down["corrupt"] + int(up["document_size"] != size),
        "database_cpu_counted": postmaster is not None,
        "redis_cpu_counted": redis_pid is not None,
        "cpus": os.cpu_count(),
    }


@click.command("media")
@click.option("--size-mb", type=click.FloatRange(min=0.001, max=2000), default=50.0,
              show_default=True, help="Size of the document, MB (10^6 bytes).")  # fmt: skip
@click.option("--part-kib", type=click.Choice(["8", "16", "32", "64", "128", "256", "512"]),
              default="512", show_default=True, help="Upload part size, KiB.")  # fmt: skip
@click.option("--chunk-kib", type=click.Choice(["64", "128", "256", "512", "1024"]),
              default="1024", show_default=True,
              help="upload.getFile chunk size, KiB.")  # fmt: skip
@click.option("--parallel", type=click.IntRange(1, 32), default=8, show_default=True,
              help="Requests in flight on the connection, each way.")  # fmt: skip
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="Extra argument for `telesrv serve` (repeatable).")  # fmt: skip
@click.option("--database-url", envvar="TELESRV_DATABASE_URL", default=None, metavar="URL",
              help="PostgreSQL to use instead of an embedded one.")  # fmt: skip
@click.option("--redis-url", envvar="TELESRV_REDIS_URL", default=None, metavar="URL",
              help="Redis to use instead of an embedded one.")  # fmt: skip
def command(
    size_mb: float,
    part_kib: str,
    chunk_kib: str,
    parallel: int,
    serve_args: tuple[str, ...],
    database_url: str | None,
    redis_url: str | None,
) -> None:
    """Upload and download MB/s and server CPU per MB, against the AES-IGE ceiling."""
    size = int(size_mb * MB)
    part_size = int(part_kib) * KIB
    check_part_count(size, part_size)
    r = asyncio.run(
        run(
            size=size,
            part_size=part_size,
            chunk_size=int(chunk_kib) * KIB,
            parallel=parallel,
            database_url=database_url,
            redis_url=redis_url,
            serve_args=serve_args,
        )
    )
    rows = [
        ("document MB", f"{size / MB:.3f}"),
        ("parts x KiB / chunk KiB", f"{r['upload_parts']} x {r['part_kib']} / {r['chunk_kib']}"),
        ("in flight", str(parallel)),
        ("upload MB/s", f"{r['upload_mb_per_s']:.2f}"),
        ("  parts only MB/s", f"{r['upload_parts_mb_per_s']:.2f}"),
        ("  uploadMedia s", f"{r['upload_finish_s']:.3f}"),
        ("upload server CPU s/MB", f"{r['upload_server_cpu_s_per_mb']:.4f}"),
        ("download MB/s", f"{r['download_mb_per_s']:.2f}"),
        ("download server CPU s/MB", f"{r['download_server_cpu_s_per_mb']:.4f}"),
        ("AES-IGE enc / dec MB/s",
         f"{r['aes_ige_encrypt_mb_per_s']} / {r['aes_ige_decrypt_mb_per_s']}"),
        ("AES-IGE enc+dec MB/s", f"{r['aes_ige_mb_per_s']}"),
        ("corrupt", str(r["corrupt"])),
    ]  # fmt: skip
    for name, value in rows:
        click.echo(f"{name:<28}{value:>18}")
    click.echo(json.dumps(r))
