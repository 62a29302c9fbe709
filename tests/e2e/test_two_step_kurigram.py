"""Two-step verification with kurigram (a Pyrogram-family client): it sets a password, and
a new kurigram device that gives the login code must give the password too."""

from __future__ import annotations

import pytest

from .test_pyrogram import (  # noqa: F401  (fixtures)
    CODE,
    PyroFactory,
    make_pyro,
    new_phone,
    no_client_warnings,
    server_key_known,
)

pyrogram = pytest.importorskip("pyrogram")
from pyrogram import errors  # noqa: E402


async def test_kurigram_sets_a_password_and_a_new_device_needs_it(
    make_pyro: PyroFactory,  # noqa: F811
) -> None:
    phone = new_phone()
    alice = make_pyro(phone)
    await alice.start()
    assert await alice.enable_cloud_password("kuri pass", hint="kuri")
    me = await alice.get_me()
    assert await alice.get_password_hint() == "kuri"

    device = make_pyro(phone, name="second")
    await device.connect()
    sent = await device.send_code(phone)
    with pytest.raises(errors.SessionPasswordNeeded):
        await device.sign_in(phone, sent.phone_code_hash, CODE)
    with pytest.raises(errors.SessionPasswordNeeded):
        await device.get_me()  # not signed in until the password
    with pytest.raises(errors.PasswordHashInvalid):
        await device.check_password("not it")
    user = await device.check_password("kuri pass")
    assert user.id == me.id
    assert (await device.get_me()).id == me.id
    await device.disconnect()
