"""The outbox's pushes written without their TL objects (rpc/push_wire.py) are the
bytes the objects' own writers give, for every field a box or a view can carry."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rpc.test_message_media import _photo
from rpc.test_render import EVERY_KIND, event
from telesrv.rpc import push_wire
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.render import (
    UpdateRenderer,
    _write_updates,
    encode_entities,
    message_tl,
    sent_answer_tl,
)
from telesrv.rpc.users_tl import user_bytes, user_to_tl
from telesrv.rpc.written_answer import WrittenAnswer
from telesrv.services.message_media import photo_snapshot
from telesrv.services.messages import BoxMessage
from telesrv.services.projection import PhotoView, Presence, StatusView, UserView
from telesrv.services.update_log import UpdateEvent
from telesrv.tl import LAYER, functions, read_object, types
from telesrv.tl.layers import MIN_LAYER

ME, BOB, CAROL, DAN, GONE = 10, 20, 30, 40, 99  # GONE: no such user

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
user_id = st.integers(1, 2**62)
text = st.text(max_size=300)
entities = st.lists(
    st.sampled_from(
        [
            types.MessageEntityBold(offset=0, length=3),
            types.MessageEntityUrl(offset=2, length=5),
            types.MessageEntityTextUrl(offset=1, length=2, url="https://example.org"),
        ]
    ),
    min_size=1,
    max_size=3,
).map(encode_entities)
forward = st.builds(
    lambda sender, date: types.MessageFwdHeader(
        from_id=types.PeerUser(user_id=sender), date=date
    ).to_bytes(),
    user_id,
    int32,
)
reactions = st.lists(
    st.tuples(st.sampled_from([ME, BOB]), st.sampled_from(["👍", "❤"]), st.booleans(), int32),
    min_size=1,
    max_size=3,
).map(lambda entries: [list(e) for e in entries])


@st.composite
def boxes(draw: st.DrawFn) -> BoxMessage:
    peer = draw(user_id.filter(lambda i: i != ME))
    sender = draw(st.sampled_from([ME, peer]))
    quoted = draw(st.none() | text)
    values: dict[str, Any] = dict(
        owner_user_id=ME,
        box_id=draw(st.integers(1, 2**31 - 1)),
        peer_user_id=peer,
        sender_user_id=sender,
        out=sender == ME,
        date=draw(int32),
        message=draw(text),
        entities=draw(st.none() | entities),
        fwd_from=draw(st.none() | forward),
        reply_to_msg_id=draw(st.none() | st.integers(1, 2**31 - 1)),
        quote_text=quoted,
        quote_entities=draw(st.none() | entities) if quoted is not None else None,
        quote_offset=draw(st.none() | st.integers(0, 100)) if quoted is not None else None,
        silent=draw(st.booleans()),
        noforwards=draw(st.booleans()),
        media_unread=draw(st.booleans()),
        edit_date=draw(st.none() | int32),
        media=draw(st.sampled_from([None, {"kind": "poll"}, dict(photo_snapshot(_photo()))])),
        grouped_id=draw(st.none() | int64),
        reactions=draw(st.none() | reactions),
        reaction_unread=draw(st.booleans()),
        pinned=draw(st.booleans()),
    )
    # Every field varies: one added to boxes and not drawn here would not.
    assert set(values) == {f.name for f in dataclasses.fields(BoxMessage)}
    return BoxMessage(**values)


@settings(max_examples=300)
@given(boxes(), int32, int32)
def test_a_message_update_is_written_as_its_objects_write_it(
    box: BoxMessage, pts: int, pts_count: int
) -> None:
    for update in (types.UpdateNewMessage, types.UpdateEditMessage):
        made = update(message=message_tl(box), pts=pts, pts_count=pts_count)
        buf = bytearray(b"before")
        push_wire.write_message_update(buf, update.CONSTRUCTOR_ID, box, pts, pts_count)
        assert bytes(buf) == b"before" + made.to_bytes()


@settings(max_examples=200)
@given(boxes(), int32, int64, st.lists(st.integers(1, 2**40), max_size=3))
def test_a_send_s_answer_is_written_as_its_objects_write_it(
    box: BoxMessage, pts: int, random_id: int, user_ids: list[int]
) -> None:
    users = [_user(box.owner_user_id, u) for u in user_ids]
    made = sent_answer_tl(box, pts, random_id, list[types.UserEmpty | types.User](users))
    assert [type(u) for u in made.updates] == [types.UpdateMessageID, types.UpdateNewMessage]
    assert made.updates[1] == types.UpdateNewMessage(message=message_tl(box), pts=pts, pts_count=1)
    assert (made.users, made.date) == (users, box.date)
    written = push_wire.sent_answer_bytes(box, pts, random_id, [u.to_bytes() for u in users])
    assert written == made.to_bytes()


def _outcome(request: Any, value: object, layer: int) -> bytes | str:
    try:
        return Dispatcher.encode(request, value, layer)
    except Exception as e:  # the same refusal either way
        return type(e).__name__


@settings(max_examples=150)
@given(boxes(), int32, int64, st.sampled_from([MIN_LAYER, 166, 177, 185, 199, LAYER]))
def test_a_send_s_written_answer_reaches_every_layer_as_its_objects_would(
    box: BoxMessage, pts: int, random_id: int, layer: int
) -> None:
    users = [_user(box.owner_user_id, box.owner_user_id), _user(box.owner_user_id, BOB)]
    made = sent_answer_tl(box, pts, random_id, list[types.UserEmpty | types.User](users))
    written = push_wire.sent_answer_bytes(box, pts, random_id, [u.to_bytes() for u in users])
    request = functions.messages.SendMessage(peer=types.InputPeerSelf(), message="", random_id=1)
    assert _outcome(request, WrittenAnswer(written), layer) == _outcome(request, made, layer)


statuses = st.one_of(
    st.builds(StatusView, st.just(Presence.ONLINE), expires=int32),
    st.builds(StatusView, st.just(Presence.OFFLINE), was_online=int32),
    st.builds(StatusView, st.sampled_from([p for p in Presence if p.name.startswith("L")])),
    st.builds(StatusView, st.just(Presence.RECENTLY)),
)
photos = st.none() | st.builds(
    PhotoView, int64, st.none() | st.binary(max_size=40), st.booleans(), st.integers(1, 5)
)


@settings(max_examples=300)
@given(
    st.fixed_dictionaries(
        dict(
            user_id=user_id,
            access_hash=int64,
            first_name=text,
            last_name=text,
            username=st.none() | text,
            phone=st.none() | st.text(alphabet="0123456789", max_size=15),
            is_self=st.booleans(),
            contact=st.booleans(),
            mutual_contact=st.booleans(),
            status=statuses,
            photo=photos,
        )
    )
)
def test_a_user_is_written_as_its_object_writes_it(values: dict[str, Any]) -> None:
    assert set(values) == set(UserView._fields)  # every field varies
    view = UserView(**values)
    assert user_bytes(view) == user_to_tl(view).to_bytes()


def _plain(box_id: int, *, owner: int = ME, sender: int = BOB) -> BoxMessage:
    peer = BOB if owner == ME else ME
    return BoxMessage(
        owner_user_id=owner, box_id=box_id, peer_user_id=peer, sender_user_id=sender,
        out=sender == owner, date=5, message=f"hi {box_id}", entities=None, fwd_from=None,
        reply_to_msg_id=None, quote_text=None, quote_entities=None, quote_offset=None,
        silent=False, noforwards=False, media_unread=False, edit_date=None,
    )  # fmt: skip


def test_every_kind_of_event_is_written_as_its_update_writes_it() -> None:
    boxes = {7: _plain(7)}
    updates, mentioned = UpdateRenderer._build(EVERY_KIND, boxes)
    written, count, user_ids = _write_updates(EVERY_KIND, boxes)
    assert count == len(updates) == 9
    assert written == b"".join(u.to_bytes() for u in updates)
    assert user_ids == mentioned == {BOB}
    assert _write_updates([event("noop", 1)], {}) == (b"", 0, set())


def _user(viewer: int, target: int) -> types.User:
    return types.User(
        id=target,
        self_=viewer == target,
        access_hash=viewer * 1000 + target,
        first_name=f"user {target}",
        status=types.UserStatusRecently(),
        photo=types.UserProfilePhotoEmpty(),
    )


class Loaders:
    """The renderer's loaders over boxes in a dict (the loading itself is the
    history store's, tested with it): counts the calls, to show the batch's."""

    def __init__(self, boxes: Sequence[BoxMessage]) -> None:
        self.boxes = {(b.owner_user_id, b.box_id): b for b in boxes}
        self.batch_loads = 0
        self.user_loads = 0

    async def boxes_of(self, owner: int, ids: list[int]) -> list[BoxMessage]:
        return [self.boxes[owner, i] for i in ids if (owner, i) in self.boxes]

    async def boxes_of_owners(self, keys: list[tuple[int, int]]) -> list[BoxMessage]:
        self.batch_loads += 1
        return [self.boxes[k] for k in keys if k in self.boxes]

    async def users_for(self, viewer: int, ids: Any) -> list[types.TypeUser]:
        return [_user(viewer, i) for i in dict.fromkeys(ids) if i != GONE]

    async def users_wire_many(
        self, wanted: dict[int, list[int]]
    ) -> dict[int, list[tuple[int, bytes]]]:
        self.user_loads += 1
        return {
            viewer: [(i, _user(viewer, i).to_bytes()) for i in dict.fromkeys(ids) if i != GONE]
            for viewer, ids in wanted.items()
        }


async def test_a_batch_gives_each_group_the_bytes_of_its_own_push() -> None:
    stored = [_plain(7), _plain(9), _plain(3, owner=BOB, sender=ME)]
    known = [_plain(5, owner=BOB, sender=BOB)]
    loaders = Loaders([*stored, *known])
    renderer = UpdateRenderer(
        loaders.boxes_of,
        loaders.users_for,
        load_boxes_of_owners=loaders.boxes_of_owners,
        users_wire_many=loaders.users_wire_many,
    )
    no_batch = UpdateRenderer(loaders.boxes_of, loaders.users_for)
    groups: list[tuple[int, list[UpdateEvent]]] = [
        (ME, EVERY_KIND),
        (BOB, [event("new_message", 1, user_id=BOB, box_ids=[3])]),
        (ME, [event("noop", 14)]),  # nothing to show: no push
        (BOB, [event("edit_message", 2, user_id=BOB, box_ids=[5])]),
        (ME, [event("new_message", 15, box_ids=[9]), event("contacts_reset", 16)]),
        # two groups of one owner mentioning some of the same users: each lists its
        # own in its own order, as alone
        (ME, [event("read_history_outbox", 17, peer_user_id=CAROL), event("noop", 18)]),
        (ME, [event("read_history_outbox", 19, peer_user_id=GONE)]),
        (
            ME,
            [
                event("peer_blocked", 20, peer_user_id=DAN, payload={"blocked": True}),
                event("read_history_outbox", 21, peer_user_id=CAROL),
            ],
        ),
    ]
    expected = [await renderer.push_bytes(owner, events, 77) for owner, events in groups]
    # the last group's own order is not the order the owner's groups first name them in
    last = expected[-1]
    assert last is not None
    updates = read_object(last)[0]
    assert isinstance(updates, types.Updates)
    assert [u.id for u in updates.users] == list({DAN, CAROL}) == [DAN, CAROL]
    gone = expected[-2]
    assert gone is not None
    alone = read_object(gone)[0]
    assert isinstance(alone, types.Updates) and alone.users == []  # GONE is not there
    assert expected[2] is None and all(b is not None for i, b in enumerate(expected) if i != 2)
    assert await renderer.known_bytes(groups, 77, known) == expected
    assert (loaders.batch_loads, loaders.user_loads) == (1, 1)
    # Without the batch loaders: the same bytes, group by group.
    assert await no_batch.batch_bytes(groups, 77) == expected
