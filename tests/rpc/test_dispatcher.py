"""The dispatcher: invoke wrappers, login checks and the one place errors are mapped."""

from __future__ import annotations

import logging

import pytest

from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.registry import Registry, method, register_all
from telesrv.rpc.written_answer import WrittenAnswer
from telesrv.services.auth_keys import ClientInfo
from telesrv.tl import LAYER, TLObject, decode, functions, types
from telesrv.tl.errors import MessageTooLong
from telesrv.tl.layers import MIN_LAYER, NEWEST_LAYER


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int | None, ClientInfo | None]] = []

    async def __call__(
        self, ctx: RequestContext, layer: int | None, client: ClientInfo | None
    ) -> None:
        self.calls.append((layer, client))


class Handlers:
    @method(functions.help.GetNearestDc, requires_auth=False)
    async def nearest(self, ctx: RequestContext, req: TLObject) -> TLObject:
        return types.NearestDc(country="xx", this_dc=2, nearest_dc=2)

    @method(functions.help.GetSupport)
    async def support(self, ctx: RequestContext, req: TLObject) -> TLObject:
        raise MessageTooLong()

    @method(functions.help.GetInviteText)
    async def broken(self, ctx: RequestContext, req: TLObject) -> TLObject:
        raise KeyError("boom")

    @method(functions.users.GetUsers)
    async def users(self, ctx: RequestContext, req: TLObject) -> list[TLObject]:
        return [types.UserEmpty(id=5)]


def make(user_id: int | None = None) -> tuple[Dispatcher, Recorder, RequestContext]:
    registry = Registry()
    register_all(registry, Handlers())
    recorder = Recorder()
    ctx = RequestContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=0.0, user_id=user_id
    )
    return Dispatcher(registry, recorder), recorder, ctx


def init(query: TLObject, layer: int = LAYER) -> TLObject:
    return functions.InvokeWithLayer(
        layer=layer,
        query=functions.InitConnection(
            api_id=6,
            device_model="dev",
            system_version="os",
            app_version="1.0",
            system_lang_code="en",
            lang_pack="",
            lang_code="en",
            query=query,
        ),
    )


async def test_wrappers_are_unwrapped_and_reported() -> None:
    dispatcher, recorder, ctx = make()
    outcome = await dispatcher.call(ctx, init(functions.help.GetNearestDc(), layer=LAYER + 5))
    assert outcome.error is None and outcome.result is not None
    assert decode(outcome.result) == types.NearestDc(country="xx", this_dc=2, nearest_dc=2)
    assert ctx.layer == NEWEST_LAYER  # a newer client is served the newest layer we have
    # the recorder is told the layer the client declared
    assert recorder.calls[0][0] == LAYER + 5 and recorder.calls[0][1].device_model == "dev"  # type: ignore[union-attr]


@pytest.mark.parametrize("layer", [MIN_LAYER, MIN_LAYER + 1, 198, 213])
async def test_every_layer_from_the_oldest_is_served_as_declared(layer: int) -> None:
    dispatcher, _, ctx = make()
    outcome = await dispatcher.call(ctx, init(functions.help.GetNearestDc(), layer=layer))
    assert outcome.error is None
    assert ctx.layer == layer


@pytest.mark.parametrize("layer", [MIN_LAYER - 1, 100, 50, 0, -1])
async def test_layers_below_the_oldest_are_refused(layer: int) -> None:
    dispatcher, _, ctx = make()
    outcome = await dispatcher.call(ctx, init(functions.help.GetNearestDc(), layer=layer))
    assert outcome.error is not None and outcome.error.message == "CONNECTION_LAYER_INVALID"
    assert outcome.result is None
    assert ctx.without_updates  # nor is it pushed updates it cannot parse


async def test_login_required_before_anything_else() -> None:
    dispatcher, _, ctx = make()
    for request in (functions.help.GetSupport(), functions.messages.GetDialogFilters()):
        outcome = await dispatcher.call(ctx, request)
        assert outcome.error is not None
        assert (outcome.error.code, outcome.error.message) == (401, "AUTH_KEY_UNREGISTERED")


async def test_a_key_that_owes_the_password_is_told_so() -> None:
    registry = Registry()
    register_all(registry, Handlers())
    asked: list[tuple[int, float]] = []

    async def waiting(perm_auth_key_id: int, now: float) -> bool:
        asked.append((perm_auth_key_id, now))
        return perm_auth_key_id == 1

    dispatcher = Dispatcher(registry, Recorder(), password_waiting=waiting)
    for key in (1, 9):
        ctx = RequestContext(auth_key_id=key, perm_auth_key_id=key, session_id=2, msg_id=3, now=5.0)
        outcome = await dispatcher.call(ctx, functions.users.GetUsers(id=[types.InputUserSelf()]))
        assert outcome.error is not None
        expected = "SESSION_PASSWORD_NEEDED" if key == 1 else "AUTH_KEY_UNREGISTERED"
        assert (outcome.error.code, outcome.error.message) == (401, expected)
        # What needs no login is served to both.
        assert (await dispatcher.call(ctx, functions.help.GetNearestDc())).error is None
    assert asked == [(1, 5.0), (9, 5.0)]  # asked only for what needs login, never else
    signed_in = RequestContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=5.0, user_id=7
    )
    outcome = await dispatcher.call(signed_in, functions.users.GetUsers(id=[types.InputUserSelf()]))
    assert outcome.error is None and len(asked) == 2


async def test_catalogued_errors_pass_through_and_unknown_methods_are_named() -> None:
    dispatcher, _, ctx = make(user_id=7)
    outcome = await dispatcher.call(ctx, functions.help.GetSupport())
    assert outcome.error is not None and (outcome.error.code, outcome.error.message) == (
        400,
        "MESSAGE_TOO_LONG",
    )
    outcome = await dispatcher.call(ctx, functions.messages.GetDialogFilters())
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.message) == (
        400,
        "METHOD_NOT_IMPLEMENTED_messages.getDialogFilters",
    )


async def test_unexpected_exceptions_become_internal_and_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher, _, ctx = make(user_id=7)
    with caplog.at_level(logging.ERROR):
        outcome = await dispatcher.call(ctx, functions.help.GetInviteText())
    assert outcome.error is not None and (outcome.error.code, outcome.error.message) == (
        500,
        "INTERNAL",
    )
    assert "KeyError" in caplog.text and "help.getInviteText" in caplog.text


async def test_vector_results_are_encoded_by_the_request_type() -> None:
    dispatcher, _, ctx = make(user_id=7)
    outcome = await dispatcher.call(
        ctx,
        functions.InvokeWithoutUpdates(query=functions.users.GetUsers(id=[types.InputUserSelf()])),
    )
    assert outcome.result == bytes.fromhex("15c4b51c01000000") + types.UserEmpty(id=5).to_bytes()
    assert ctx.without_updates


# An answer whose user differs between layers (the User constructor changed often).
WRITTEN = types.Updates(
    updates=[types.UpdateMessageID(id=4, random_id=-9)],
    users=[types.User(id=5, first_name="Ann", access_hash=6, contact=True)],
    chats=[],
    date=1,
    seq=0,
)


@pytest.mark.parametrize("layer", [MIN_LAYER, 170, 185, LAYER])
def test_a_written_answer_is_sent_as_its_object_would_be(layer: int) -> None:
    request = functions.messages.SendMessage(peer=types.InputPeerSelf(), message="x", random_id=1)
    written = Dispatcher.encode(request, WrittenAnswer(WRITTEN.to_bytes()), layer)
    assert written == Dispatcher.encode(request, WRITTEN, layer)
    assert (written == WRITTEN.to_bytes()) == (layer == LAYER)  # older ones were converted


async def test_a_constructor_in_place_of_a_query_is_refused() -> None:
    dispatcher, _, ctx = make(user_id=7)
    outcome = await dispatcher.call(
        ctx,
        functions.InvokeWithLayer(
            layer=LAYER, query=types.NearestDc(country="", this_dc=1, nearest_dc=1)
        ),
    )
    assert outcome.error is not None and outcome.error.code == 400


class FileHandlers:
    @method(functions.upload.SaveFilePart)
    async def save_part(self, ctx: RequestContext, req: TLObject) -> bool:
        return True


async def test_file_transfers_do_not_subscribe_their_session_to_updates() -> None:
    # Apps move files on sessions of their own beside the main one, on the same key:
    # updates pushed there too would reach them twice, their own changes coming back.
    registry = Registry()
    register_all(registry, Handlers())
    register_all(registry, FileHandlers())
    dispatcher = Dispatcher(registry, Recorder())

    def context() -> RequestContext:
        return RequestContext(
            auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=0.0, user_id=7
        )

    part = functions.upload.SaveFilePart(file_id=1, file_part=0, bytes=b"x")
    for request in (part, init(part)):
        ctx = context()
        outcome = await dispatcher.call(ctx, request)
        assert outcome.error is None
        assert ctx.without_updates
    # Anything else subscribes it (the gateway marks the session on the first such call).
    ctx = context()
    outcome = await dispatcher.call(ctx, init(functions.users.GetUsers(id=[])))
    assert outcome.error is None
    assert not ctx.without_updates
