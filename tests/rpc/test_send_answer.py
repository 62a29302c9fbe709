"""The answer to messages.sendMessage at every layer: written straight to bytes for the
current one, from its TL objects for any other, and the same bytes either way."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from conftest import MakeSettings

from rpc.test_app_screens import Env, input_peer_of, open_env
from telesrv.rpc.written_answer import WrittenAnswer
from telesrv.tl import LAYER, functions, types
from telesrv.tl.layers import MIN_LAYER, NEWEST_LAYER, downgrade_bytes

_random_ids = itertools.count(7_000_001)


@pytest.fixture
async def env(make_settings: MakeSettings, tmp_path: Any) -> AsyncIterator[Env]:
    async with open_env(make_settings, tmp_path) as built:
        yield built


async def test_every_layer_is_answered_as_the_current_one_converted(env: Env) -> None:
    alice, _ = await env.user()
    bob, bob_phone = await env.user()
    peer = await input_peer_of(alice, bob_phone)
    send = functions.messages.SendMessage(peer=peer, message="hi", random_id=next(_random_ids))
    handler = env.server.gateway.dispatcher._registry.get(functions.messages.SendMessage)
    assert handler is not None
    current = await handler.handler(alice.ctx(), send)
    assert isinstance(current, WrittenAnswer)  # the current layer takes the bytes
    layers = sorted({MIN_LAYER, 185, NEWEST_LAYER})
    assert LAYER not in layers and NEWEST_LAYER != LAYER
    for layer in layers:
        # A retry of the same send is answered with the same message, at this layer.
        ctx = replace(alice.ctx(), layer=layer)
        answer = await handler.handler(ctx, send)
        assert isinstance(answer, types.Updates)  # any other layer: the objects
        outcome = await alice.outcome(functions.InvokeWithLayer(layer=layer, query=send))
        assert outcome.error is None
        assert outcome.result == downgrade_bytes(current.body, layer)
        # (an older layer's user differs; the newest vendored one writes these alike)
        assert (outcome.result == current.body) == (layer > LAYER)


@pytest.mark.parametrize("layer", [MIN_LAYER, LAYER, NEWEST_LAYER])
async def test_a_send_s_answer_holds_its_message_and_both_users(env: Env, layer: int) -> None:
    alice, _ = await env.user()
    bob, bob_phone = await env.user()
    peer = await input_peer_of(alice, bob_phone)
    send = functions.messages.SendMessage(peer=peer, message="hi", random_id=next(_random_ids))
    outcome = await alice.outcome(functions.InvokeWithLayer(layer=layer, query=send))
    assert outcome.error is None and outcome.result is not None
    if layer == LAYER:
        answer = await alice(send)  # the retry's answer, read in the current layer
        assert isinstance(answer, types.Updates)
        new = answer.updates[1]
        assert isinstance(new, types.UpdateNewMessage) and isinstance(new.message, types.Message)
        assert new.message.message == "hi"
        assert {u.id for u in answer.users} == {alice.user_id, bob.user_id}
