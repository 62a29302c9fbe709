"""The operator's commands next to a running server: devices, login blocks, unknown
methods. The commands run in their own event loop (as in their own process)."""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner, Result
from telethon import errors, functions

from telesrv import cli
from telesrv.services.audit import AUDIT_LOGGER

from .conftest import ClientFactory, RunningServer
from .test_messages import CODE, sign_in


async def admin(server: RunningServer, *args: str) -> Result:
    storage = [
        "--data-dir",
        str(server.settings.data_dir),
        "--database-url",
        str(server.settings.database_url),
        "--redis-url",
        str(server.settings.redis_url),
    ]
    argv = [*args[:2], *storage, *args[2:]]
    result = await asyncio.to_thread(CliRunner().invoke, cli.main, argv)
    return result


async def logged_out(server: RunningServer, user_id: int) -> None:
    """Until the server has closed every session of the user (the command's message
    travels through Redis)."""
    while server.gateway.sessions.sessions_of_user(user_id):
        await asyncio.sleep(0.02)


def audited(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]


async def test_sessions_list_and_end_one_device(
    server: RunningServer, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger=AUDIT_LOGGER)
    alice = await sign_in(make_client)
    me = await alice.get_me()
    laptop = await sign_in(make_client, "+" + me.phone)

    listed = await admin(server, "sessions", "list", "+" + me.phone)
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert len(lines) == 3  # header and two devices
    hashes = [int(line.split()[0]) for line in lines[1:]]
    mine = await alice(functions.account.GetAuthorizationsRequest())
    laptop_hash = next(a.hash for a in mine.authorizations if not a.current) % 2**64
    assert laptop_hash in hashes  # shown unsigned: a leading - would read as an option
    assert "229" in lines[1]  # the layer the device reported

    ended = await admin(server, "sessions", "end", str(me.id), str(laptop_hash))
    assert ended.exit_code == 0, ended.output
    while len(server.gateway.sessions.sessions_of_user(me.id)) > 1:
        await asyncio.sleep(0.02)
    with pytest.raises(errors.AuthKeyUnregisteredError):
        await laptop(functions.updates.GetStateRequest())
    assert (await alice.get_me()).id == me.id  # the other device goes on
    # The first sign-in made the account (auto-registration): a sign-up; the second
    # device's found it.
    assert [a.split(" auth_key=")[0] for a in audited(caplog)][:2] == [
        f"sign_up ok user={me.id}",
        f"sign_in ok user={me.id}",
    ]
    [line] = [a for a in audited(caplog) if a.startswith("reset_authorization ")]
    assert line.startswith(f"reset_authorization ok user={me.id} auth_key=")
    assert line.endswith(" ip=- by=admin")

    again = await admin(server, "sessions", "end", str(me.id), str(laptop_hash))
    assert again.exit_code == 1 and "authorization not found" in again.output
    nobody = await admin(server, "sessions", "list", "+1999000111")
    assert nobody.exit_code == 1 and "user not found" in nobody.output


async def test_block_login_logs_out_and_refuses_sign_in(
    server: RunningServer, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger=AUDIT_LOGGER)
    alice = await sign_in(make_client)
    me = await alice.get_me()
    phone = "+" + me.phone

    blocked = await admin(server, "users", "block-login", phone)
    assert blocked.exit_code == 0, blocked.output
    assert blocked.stdout == f"{phone}: login blocked; 1 device(s) logged out\n"
    await logged_out(server, me.id)
    with pytest.raises(errors.AuthKeyUnregisteredError):
        await alice(functions.updates.GetStateRequest())
    [line] = [a for a in audited(caplog) if a.startswith("logout ")]
    assert line.startswith(f"logout login_blocked user={me.id} auth_key=")
    assert line.endswith(" ip=- by=admin")

    newcomer = make_client()
    await newcomer.connect()
    with pytest.raises(errors.PhoneNumberBannedError):
        await newcomer.send_code_request(phone)
    listed = await admin(server, "users", "blocked-logins")
    assert listed.stdout == f"{phone}\n"

    # A code sent before the block does not log in after it.
    other = make_client()
    await other.connect()
    sent = await other.send_code_request("+15559876001")
    assert (await admin(server, "users", "block-login", "+15559876001")).exit_code == 0
    with pytest.raises(errors.PhoneNumberBannedError):
        await other.sign_in("+15559876001", CODE, phone_code_hash=sent.phone_code_hash)

    unblocked = await admin(server, "users", "unblock-login", phone)
    assert unblocked.stdout == f"{phone}: login unblocked\n"
    back = await sign_in(make_client, phone)
    assert (await back.get_me()).id == me.id
    again = await admin(server, "users", "unblock-login", phone)
    assert again.stdout == f"{phone}: was not blocked\n"


async def test_stats_unknown_methods(server: RunningServer, make_client: ClientFactory) -> None:
    empty = await admin(server, "stats", "unknown-methods")
    assert empty.stdout == "no unknown methods recorded\n"
    alice = await sign_in(make_client)
    for method in ("metrics", "other", "third"):
        with pytest.raises(errors.RPCError, match="METHOD_NOT_IMPLEMENTED"):
            await alice(functions.stickers.CheckShortNameRequest(short_name=method))
    with pytest.raises(errors.RPCError, match="METHOD_NOT_IMPLEMENTED"):
        await alice(functions.stickers.SuggestShortNameRequest(title="x"))

    shown = await admin(server, "stats", "unknown-methods")
    assert shown.exit_code == 0, shown.output
    header, first, second = shown.stdout.splitlines()
    assert first.split()[0] == "3" and "stickers.checkShortName (" in first
    assert " 229 " in first
    assert second.split()[0] == "1" and "stickers.suggestShortName" in second
