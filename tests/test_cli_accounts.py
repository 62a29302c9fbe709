"""`telesrv users add|list` and `telesrv codes PHONE` against a database (no server running)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
from click.testing import CliRunner, Result

from telesrv import cli
from telesrv.store import db as dbmod


def run(args: list[str], data_dir: Path, database_url: str, redis_url: str) -> Result:
    storage = [
        "--data-dir",
        str(data_dir),
        "--database-url",
        database_url,
        "--redis-url",
        redis_url,
    ]
    return CliRunner().invoke(cli.main, [*args[:2], *storage, *args[2:]])


def test_users_add_and_list(tmp_path: Path, database_url: str, redis_url: str) -> None:
    def users(*args: str) -> Result:
        return run(["users", *args], tmp_path, database_url, redis_url)

    listed = users("list")
    assert listed.exit_code == 0, listed.output
    assert "no users" in listed.output

    added = users(
        "add", "--phone", "+1 555 0123 456", "--first-name", "Ann", "--last-name", "Lee",
        "--username", "ann_cli",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert added.output.startswith("created user ")
    assert "+15550123456 Ann Lee @ann_cli" in added.output
    assert users("add", "--phone", "+15550999", "--first-name", "Bo").exit_code == 0

    listed = users("list")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[1].endswith("+15550123456 Ann Lee @ann_cli")
    assert lines[2].endswith("+15550999 Bo")

    again = users("add", "--phone", "15550123456", "--first-name", "X")
    assert again.exit_code == 1 and "phone number occupied" in again.output
    taken = users("add", "--phone", "+15550998", "--first-name", "X", "--username", "ANN_CLI")
    assert taken.exit_code == 1 and "username occupied" in taken.output
    bad = users("add", "--phone", "+15550997", "--first-name", "X", "--username", "1x")
    assert bad.exit_code == 1 and "username invalid" in bad.output
    bad_phone = users("add", "--phone", "call me", "--first-name", "X")
    assert bad_phone.exit_code == 1 and "phone number invalid" in bad_phone.output


def test_users_remove_password(tmp_path: Path, database_url: str, redis_url: str) -> None:
    def users(*args: str) -> Result:
        return run(["users", *args], tmp_path, database_url, redis_url)

    assert users("add", "--phone", "+15550777", "--first-name", "Pat").exit_code == 0

    async def set_password() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                """
                INSERT INTO account_passwords (user_id, salt1, salt2, verifier, updated_at)
                SELECT user_id, 'a', 'b', 'v', now() FROM users WHERE phone = '15550777'
                """
            )
        finally:
            await conn.close()

    asyncio.run(set_password())
    removed = users("remove-password", "+15550777")
    assert removed.exit_code == 0, removed.output
    assert removed.output.strip() == "+15550777: password removed"
    again = users("remove-password", "+15550777")
    assert again.output.strip() == "+15550777: had no password"
    unknown = users("remove-password", "+15550776")
    assert unknown.exit_code == 1 and "user not found" in unknown.output


def test_codes_lists_pending_codes(tmp_path: Path, database_url: str, redis_url: str) -> None:
    none = run(["codes", "+15550777"], tmp_path, database_url, redis_url)
    assert none.exit_code == 0, none.output
    assert "no pending login codes for +15550777" in none.output

    async def add_codes() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                """
                INSERT INTO login_codes (phone_code_hash, phone, code, expires_at, attempts)
                VALUES ('cli-live', '15550777', '48151', now() + interval '200 seconds', 2),
                       ('cli-old', '15550777', '11111', now() - interval '1 second', 0)
                """
            )
        finally:
            await conn.close()

    asyncio.run(add_codes())
    shown = run(["codes", "+15550777"], tmp_path, database_url, redis_url)
    assert shown.exit_code == 0, shown.output
    [line] = shown.output.splitlines()
    assert line.startswith("48151  expires in 19") and line.endswith("wrong attempts 2")


def test_an_operator_command_does_not_warm_the_pool(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    # A one-off command serves no requests: warming the whole pool would only open
    # connections to a database a running server may be using, and delay the command.
    warmed = dbmod.WARMED_CONNECTIONS._value.get()
    listed = run(["users", "list"], tmp_path, database_url, redis_url)
    assert listed.exit_code == 0, listed.output
    assert dbmod.WARMED_CONNECTIONS._value.get() == warmed
