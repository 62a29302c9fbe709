"""Each refusal is declared once, as its catalogue row, and the dispatcher answers a
domain error with the catalogue error of the name it carries."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import asyncpg
import pytest

import telesrv.services
import telesrv.store
from telesrv.rpc.context import RequestContext
from telesrv.rpc.dispatcher import Dispatcher
from telesrv.rpc.errors import to_rpc_error
from telesrv.rpc.registry import Registry, method, register_all
from telesrv.services import accounts
from telesrv.services import errors as domain
from telesrv.services.contacts import PhoneLookupFlood
from telesrv.store import refusals
from telesrv.store.db import sql_refusal
from telesrv.tl import TLObject, functions
from telesrv.tl import errors as rpc
from telesrv.tl.rpcerror import RpcError, load_catalogue


def _import_all() -> None:
    """Every module of the layers that may raise domain errors, so that every
    subclass declared anywhere in them is seen."""
    for package in (telesrv.store, telesrv.services):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)


def _subclasses(cls: type[domain.DomainError]) -> list[type[domain.DomainError]]:
    found: list[type[domain.DomainError]] = []
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("telesrv."):
            found.append(sub)
        found += _subclasses(sub)
    return found


_import_all()
DOMAIN_ERRORS = _subclasses(domain.DomainError)


def _instance(cls: type[domain.DomainError]) -> domain.DomainError:
    has_value = cls.TEMPLATE.endswith("_X") or "_X_" in cls.TEMPLATE
    return cls(3) if has_value else cls()


def test_the_walk_sees_the_generated_and_the_hand_written_errors() -> None:
    assert {domain.MessageEmpty, accounts.UserNotFound, PhoneLookupFlood} <= set(DOMAIN_ERRORS)


def test_the_services_raise_no_wire_errors() -> None:
    for cls in DOMAIN_ERRORS:
        assert not issubclass(cls, RpcError), cls


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda c: c.__name__)
def test_every_domain_error_has_its_catalogue_error(cls: type[domain.DomainError]) -> None:
    error = to_rpc_error(_instance(cls))
    assert isinstance(error, RpcError)
    if cls.__module__ == refusals.__name__:  # the generated errors are named as they travel
        assert type(error).__name__ == cls.__name__


@pytest.mark.parametrize("cls", DOMAIN_ERRORS, ids=lambda c: c.__name__)
def test_every_domain_error_carries_a_catalogue_name_and_its_code(
    cls: type[domain.DomainError],
) -> None:
    assert cls.TEMPLATE, f"{cls.__name__} has no catalogue name: subclass a refusal"
    assert cls.TEMPLATE in rpc.BY_TEMPLATE, f"{cls.TEMPLATE} is not in the catalogue"
    assert cls.CODE == rpc.BY_TEMPLATE[cls.TEMPLATE].CODE


def test_a_refusal_is_declared_only_by_its_catalogue_row() -> None:
    # A class outside the generated module that wrote a name or a code of its own would
    # be a second declaration of a refusal (possibly a different one).
    declaring = [
        c
        for c in DOMAIN_ERRORS
        if c.__module__ != refusals.__name__ and {"TEMPLATE", "CODE"} & set(vars(c))
    ]
    assert declaring == []
    generated = [c for c in DOMAIN_ERRORS if c.__module__ == refusals.__name__]
    names = [c.TEMPLATE for c in generated]
    assert len(names) == len(set(names))
    assert set(names) == {s.name for s in load_catalogue() if s.domain}


def test_flood_waits_carry_their_seconds() -> None:
    assert to_rpc_error(domain.FloodWait(17)).message == "FLOOD_WAIT_17"
    assert to_rpc_error(accounts.SendCodeFlood(9)).message == "FLOOD_WAIT_9"
    assert to_rpc_error(PhoneLookupFlood(4)).message == "FLOOD_WAIT_4"
    assert accounts.SendCodeFlood(9).retry_after == PhoneLookupFlood(9).retry_after == 9
    missing = to_rpc_error(domain.FilePartMissing(3))
    assert missing.message == "FILE_PART_3_MISSING" and isinstance(missing, rpc.FilePartMissing)


def test_a_more_specific_refusal_travels_under_its_parents_name() -> None:
    assert isinstance(to_rpc_error(accounts.UserNotFound()), rpc.UserIdInvalid)
    assert isinstance(to_rpc_error(accounts.AuthorizationNotFound()), rpc.HashInvalid)


def test_a_sql_function_refuses_by_a_catalogue_name() -> None:
    assert isinstance(
        sql_refusal(asyncpg.RaiseError("MESSAGE_ID_INVALID")), domain.MessageIdInvalid
    )
    assert isinstance(sql_refusal(asyncpg.RaiseError("MEDIA_INVALID")), domain.MediaInvalid)
    # Anything else a function raises is unexpected: it stays as it is (INTERNAL).
    for message in ("edit of message 7 found an owner without a pts", "FLOOD_WAIT_X"):
        bug = asyncpg.RaiseError(message)
        assert sql_refusal(bug) is bug


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


async def test_a_domain_error_without_a_catalogue_name_is_internal_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher, ctx = _dispatcher()
    with caplog.at_level(logging.ERROR, logger="telesrv.rpc.dispatcher"):
        outcome = await dispatcher.call(ctx, functions.help.GetInviteText())
    assert isinstance(outcome.error, rpc.Internal)
    assert "unmapped domain error in help.getInviteText" in caplog.text
    assert "Unmapped" in caplog.text  # with its traceback
