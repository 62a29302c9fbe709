"""Hostile inputs through Telethon: entity payloads, repeated forward ids and NUL
characters get clear 400 errors, at and one past each bound, and leave the server
serving everyone else."""

from __future__ import annotations

from typing import Any

from telethon import functions, types

from telesrv.rpc.messages import (
    MAX_ENTITIES,
    MAX_ENTITY_TEXT_TOTAL,
    MAX_LANGUAGE_LENGTH,
    MAX_URL_LENGTH,
)

from .conftest import ClientFactory
from .test_messages import peer_of, sign_in
from .test_send_limits import error_of, send


def link(url: str, offset: int = 0) -> Any:
    return types.MessageEntityTextUrl(offset=offset, length=1, url=url)


async def test_entity_payloads_are_bounded(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    url = "https://example.com/"
    at = url + "a" * (MAX_URL_LENGTH - len(url))

    sent = await send(alice, peer, "x", entities=[link(at)])
    assert sent.updates[1].message.entities[0].url == at
    # The reported attack: a 900 KB link in one message.
    assert await error_of(send(alice, peer, "x", entities=[link(at + "a")])) == (
        "ENTITIES_TOO_LONG"
    )
    assert await error_of(send(alice, peer, "x", entities=[link("h" * 900_000)])) == (
        "ENTITIES_TOO_LONG"
    )

    pre = types.MessageEntityPre(offset=0, length=1, language="p" * MAX_LANGUAGE_LENGTH)
    await send(alice, peer, "x", entities=[pre])
    pre.language += "p"
    assert await error_of(send(alice, peer, "x", entities=[pre])) == "ENTITIES_TOO_LONG"

    # Together: MAX_ENTITY_TEXT_TOTAL characters of links in one message, not one more.
    n = MAX_ENTITY_TEXT_TOTAL // MAX_URL_LENGTH
    text = "x" * (n + 1)
    many = [link(at, i) for i in range(n)]
    await send(alice, peer, text, entities=many)
    extra = [*many, link("https://e.x/", n)]
    assert await error_of(send(alice, peer, text, entities=extra)) == "ENTITIES_TOO_LONG"

    bold = [types.MessageEntityBold(offset=i, length=1) for i in range(MAX_ENTITIES)]
    text = "b" * (MAX_ENTITIES + 1)
    await send(alice, peer, text, entities=bold)
    past = [*bold, types.MessageEntityBold(offset=MAX_ENTITIES, length=1)]
    assert await error_of(send(alice, peer, text, entities=past)) == "ENTITIES_TOO_LONG"

    # The same bounds hold for an edit and for a quote's entities.
    mid = sent.updates[1].message.id
    edit = functions.messages.EditMessageRequest(
        peer=peer, id=mid, message="y", entities=[link(at + "a")]
    )
    assert await error_of(alice(edit)) == "ENTITIES_TOO_LONG"
    edit.entities = [link(at)]
    await alice(edit)
    quote = types.InputReplyToMessage(
        reply_to_msg_id=mid, quote_text="y", quote_entities=[link(at + "a")]
    )
    assert await error_of(send(alice, peer, "x", reply_to=quote)) == "ENTITIES_TOO_LONG"


async def test_mentions_are_checked_and_shown_as_user_ids(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    carol = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    carol_id = (await carol.get_me()).id
    carol_peer = await peer_of(alice, carol)
    mention = types.InputMessageEntityMentionName(
        offset=0,
        length=5,
        user_id=types.InputUser(user_id=carol_id, access_hash=carol_peer.access_hash),
    )
    sent = await send(alice, peer, "carol", entities=[mention])
    [shown] = sent.updates[1].message.entities
    assert isinstance(shown, types.MessageEntityMentionName) and shown.user_id == carol_id
    [seen] = (await bob.get_messages(await peer_of(bob, alice), limit=1))[0].entities
    assert isinstance(seen, types.MessageEntityMentionName) and seen.user_id == carol_id

    forged = types.InputMessageEntityMentionName(
        offset=0, length=5, user_id=types.InputUser(user_id=carol_id, access_hash=1)
    )
    assert await error_of(send(alice, peer, "carol", entities=[forged])) == (
        "ENTITY_MENTION_USER_INVALID"
    )


async def test_a_forward_repeating_an_id_is_refused(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    first = (await send(alice, peer, "one")).updates[0].id
    second = (await send(alice, peer, "two")).updates[0].id

    def forward(ids: list[int]) -> Any:
        return alice(
            functions.messages.ForwardMessagesRequest(
                from_peer=peer, id=ids, to_peer=types.InputPeerSelf()
            )
        )

    assert await error_of(forward([first] * 100)) == "MESSAGE_ID_INVALID"
    assert await error_of(forward([first, second, first])) == "MESSAGE_ID_INVALID"
    saved = await alice.get_messages("me", limit=10)
    assert saved.total == 0
    await forward([first, second])
    assert (await alice.get_messages("me", limit=10)).total == 2


async def test_nul_characters_are_a_clear_400(make_client: ClientFactory) -> None:
    alice = await sign_in(make_client, updates=False)
    bob = await sign_in(make_client, updates=False)
    peer = await peer_of(alice, bob)
    nul = "a\x00b"
    attempts = [
        send(alice, peer, nul),
        send(alice, peer, "x", entities=[link("https://e.x/" + nul)]),
        send(
            alice,
            peer,
            "x",
            reply_to=types.InputReplyToMessage(
                reply_to_msg_id=(await send(alice, peer, "ab")).updates[0].id, quote_text=nul
            ),
        ),
        alice(functions.account.UpdateProfileRequest(first_name=nul)),
        alice(functions.account.UpdateProfileRequest(last_name=nul)),
        alice(functions.account.UpdateProfileRequest(about=nul)),
        alice(functions.account.UpdateUsernameRequest(username="user\x00name")),
        alice(functions.account.CheckUsernameRequest(username="user\x00name")),
        alice(
            functions.messages.SearchRequest(
                peer=peer,
                q=nul,
                filter=types.InputMessagesFilterEmpty(),
                min_date=None,
                max_date=None,
                offset_id=0,
                add_offset=0,
                limit=10,
                max_id=0,
                min_id=0,
                hash=0,
            )
        ),
        alice(functions.contacts.ResolvePhoneRequest(phone="1555\x000001")),
        alice(functions.contacts.ResolveUsernameRequest(username=nul)),
        alice(
            functions.contacts.ImportContactsRequest(
                contacts=[
                    types.InputPhoneContact(
                        client_id=1, phone="15550001", first_name=nul, last_name=""
                    )
                ]
            )
        ),
        alice(
            functions.contacts.AddContactRequest(
                id=await alice.get_input_entity(peer), first_name=nul, last_name="", phone=""
            )
        ),
    ]
    for attempt in attempts:
        assert await error_of(attempt) == "INPUT_STRING_INVALID"
    # Nothing broke: both still talk.
    assert (await send(alice, peer, "still here")).updates[1].message.message == "still here"
    assert (await bob.get_me()).id
