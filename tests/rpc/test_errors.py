"""Domain errors become catalogue errors in one table, applied by the dispatcher."""

from __future__ import annotations

import logging

import pytest

from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.errors import to_rpc_error
from telesrv.rpc.registry import Registry, method, register_all
from telesrv.services import accounts
from telesrv.services import errors as domain
from telesrv.tl import TLObject, functions
from telesrv.tl import errors as rpc
from telesrv.tl.rpcerror import RpcError


def _subclasses(cls: type[domain.DomainError]) -> list[type[domain.DomainError]]:
    found: list[type[domain.DomainError]] = []
    for sub in cls.__subclasses__():
        if sub.__module__ in (domain.__name__, accounts.__name__):
            found.append(sub)
        found += _subclasses(sub)
    return found


DOMAIN_ERRORS = [c for c in _subclasses(domain.DomainError) if c is not accounts.AccountError]
_WITH_VALUE = {domain.FloodWait: (30,), accounts.SendCodeFlood: (30,), domain.FilePartMissing: (3,)}


def test_the_services_raise_no_wire_errors() -> None:
    for cls in DOMAIN_ERRORS:
        assert not issubclass(cls, RpcError), cls


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda c: c.__name__)
def test_every_domain_error_has_its_catalogue_error(cls: type[domain.DomainError]) -> None:
    error = to_rpc_error(cls(*_WITH_VALUE.get(cls, ())))
    assert isinstance(error, RpcError)
    if cls.__module__ == domain.__name__:  # the message errors are named as they travel
        assert type(error).__name__ == cls.__name__


def test_flood_waits_carry_their_seconds() -> None:
    assert to_rpc_error(domain.FloodWait(17)).message == "FLOOD_WAIT_17"
    assert to_rpc_error(accounts.SendCodeFlood(9)).message == "FLOOD_WAIT_9"


class Unmapped(domain.DomainError):
    pass


class Handlers:
    @method(functions.help.GetSupport)
    async def too_long(self, ctx: RequestContext, req: TLObject) -> TLObject:
        raise domain.MessageTooLong()

    @method(functions.help.GetInviteText)
    async def unmapped(self, ctx: RequestContext, req: TLObject) -> TLObject:
        raise Unmapped()


def _dispatcher() -> tuple[Dispatcher, RequestContext]:
    registry = Registry()
    register_all(registry, Handlers())

    async def no_info(*args: object) -> None:
        return None

    ctx = RequestContext(
        auth_key_id=1, perm_auth_key_id=1, session_id=2, msg_id=3, now=0.0, user_id=7
    )
    return Dispatcher(registry, no_info), ctx


async def test_the_dispatcher_sends_a_domain_error_as_its_catalogue_error() -> None:
    dispatcher, ctx = _dispatcher()
    outcome = await dispatcher.call(ctx, functions.help.GetSupport())
    assert isinstance(outcome.error, rpc.MessageTooLong)


async def test_a_domain_error_missing_from_the_table_is_internal_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher, ctx = _dispatcher()
    with caplog.at_level(logging.ERROR, logger="telesrv.rpc.dispatcher"):
        outcome = await dispatcher.call(ctx, functions.help.GetInviteText())
    assert isinstance(outcome.error, rpc.Internal)
    assert "unmapped domain error in help.getInviteText" in caplog.text
    assert "Unmapped" in caplog.text  # with its traceback
