from __future__ import annotations

import os
from pathlib import Path

import asyncpg
import pytest

from telesrv.store import embedded
from telesrv.store.embedded import EmbeddedPostgres, EmbeddedServerError


def test_a_data_directory_of_another_major_version_is_refused_with_advice(
    tmp_path: Path,
) -> None:
    # What the earlier embedded server (pgserver, PostgreSQL 16) left behind.
    data = tmp_path / "pg"
    data.mkdir()
    (data / "PG_VERSION").write_text("16\n")
    (data / "base").mkdir()
    with pytest.raises(EmbeddedServerError) as err:
        EmbeddedPostgres(data).start()
    message = str(err.value)
    assert "made by PostgreSQL 16" in message and "move that directory away" in message
    assert "pg_dump" in message and "--database-url" in message
    assert not (data / "postmaster.pid").exists()  # nothing was started on it


def test_data_dir_major_version(tmp_path: Path) -> None:
    assert embedded.data_dir_major_version(tmp_path) is None
    (tmp_path / "PG_VERSION").write_text("18\n")
    assert embedded.data_dir_major_version(tmp_path) == 18


@pytest.mark.skipif(
    bool(os.environ.get("TELESRV_TEST_DATABASE_URL")), reason="the embedded server's locale"
)
async def test_the_embedded_server_makes_trigrams_of_every_script(pg_server_url: str) -> None:
    # initdb runs under a UTF-8 locale whatever the caller's environment, so Chinese,
    # Japanese, Korean and Cyrillic letters are letters to pg_trgm and ILIKE.
    conn = await asyncpg.connect(pg_server_url)
    try:
        row = await conn.fetchrow(
            "SELECT datctype FROM pg_database WHERE datname = current_database()"
        )
        assert row is not None and row["datctype"] == "C.UTF-8"
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        assert await conn.fetchval("SELECT show_trgm('这是测试') <> '{}'::text[]")
        assert await conn.fetchval("SELECT 'ПРИВЕТ' ILIKE '%привет%'")
    finally:
        await conn.close()
