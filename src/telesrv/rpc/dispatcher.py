"""Run one RPC: unwrap the invoke wrappers, check login, call the handler, encode.

This is the one place where exceptions become ``rpc_error``: a catalogued
:class:`RpcError` goes to the client as it is, a domain error as the catalogue
error of the name it carries (``rpc.errors``), anything else is logged with its traceback
and answered with 500 ``INTERNAL``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from telesrv.rpc.context import RequestContext
from telesrv.rpc.errors import to_rpc_error
from telesrv.rpc.metrics import RPC_CALLS, RPC_SECONDS, UNKNOWN_METHODS, outcome
from telesrv.rpc.registry import Registry
from telesrv.rpc.written_answer import WrittenAnswer
from telesrv.services.auth_keys import ClientInfo
from telesrv.services.errors import UNAVAILABLE_ERRORS, DomainError
from telesrv.tl import LAYER, TLObject, functions
from telesrv.tl.errors import (
    AuthKeyUnregistered,
    ConnectionLayerInvalid,
    InputStringInvalid,
    Internal,
    MethodNotImplemented,
    RpcError,
    SessionPasswordNeeded,
    Timeout,
)
from telesrv.tl.layers import MIN_LAYER, downgrade, served_layer
from telesrv.tl.service import decode_result, encode_result

log = logging.getLogger(__name__)

# Methods that move files (upload.getFile, upload.saveFilePart ...): they do not make
# their session one that is pushed updates.
FILE_QUERY_PREFIX = "upload."

# (ctx, layer or None, client info or None) -> persisted for the key and session
ConnectionInfoSink = Callable[[RequestContext, int | None, ClientInfo | None], Awaitable[None]]
# (ctx, TL name of a method without a handler) -> remembered for the operator
UnknownMethodSink = Callable[[RequestContext, str], Awaitable[None]]
# (permanent auth key id, now) -> whether the key gave a login code and owes the password
PasswordWaiting = Callable[[int, float], Awaitable[bool]]


# Labelled metric children, kept: looking them up through ``labels()`` on every call
# costs more than the observation. Method names come from the schema, so these stay
# small.
_rpc_seconds = functools.cache(RPC_SECONDS.labels)
_rpc_calls = functools.cache(RPC_CALLS.labels)


async def _forget(ctx: RequestContext, method: str) -> None:
    return None


async def _never_waiting(perm_auth_key_id: int, now: float) -> bool:
    return False


@dataclass(frozen=True)
class RpcOutcome:
    """Either ``result`` (serialized) or ``error`` is set."""

    result: bytes | None = None
    error: RpcError | None = None


class Dispatcher:
    def __init__(
        self,
        registry: Registry,
        on_connection_info: ConnectionInfoSink,
        on_unknown_method: UnknownMethodSink = _forget,
        *,
        password_waiting: PasswordWaiting | None = None,
    ) -> None:
        self._registry = registry
        self._on_connection_info = on_connection_info
        self._on_unknown_method = on_unknown_method
        self._password_waiting = password_waiting or _never_waiting

    def method_names(self) -> Iterable[str]:
        """The TL names of the methods served, sorted."""
        return self._registry.names()

    async def call(self, ctx: RequestContext, request: TLObject) -> RpcOutcome:
        started = time.perf_counter()
        answer = await self._call(ctx, request)
        method = _method_name(request)
        _rpc_seconds(method).observe(time.perf_counter() - started)
        _rpc_calls(method, outcome(answer.error)).inc()
        if isinstance(answer.error, MethodNotImplemented):
            UNKNOWN_METHODS.labels(method).inc()
            try:
                await self._on_unknown_method(ctx, method)
            except Exception:  # the client's answer does not depend on the record
                log.exception("could not record unknown method %s", method)
        return answer

    async def _call(self, ctx: RequestContext, request: TLObject) -> RpcOutcome:
        try:
            if has_nul(request):
                # PostgreSQL cannot store NUL in text, and no client means one: every
                # string of every request (wrappers included) is refused here, once.
                raise InputStringInvalid()
            value, inner = await self._invoke(ctx, request)
            return RpcOutcome(result=self.encode(inner, value, ctx.layer))
        except RpcError as e:
            return RpcOutcome(error=e)
        except DomainError as e:
            return RpcOutcome(error=_catalogue_error(request, e))
        except UNAVAILABLE_ERRORS as e:
            # The database did not answer in time: a known condition, no traceback.
            log.warning("%s timed out: %s", _method_name(request), type(e).__name__)
            return RpcOutcome(error=Timeout())
        except Exception:
            log.exception("unexpected error in %s", _method_name(request))
            return RpcOutcome(error=Internal())

    @staticmethod
    def encode(request: TLObject, value: object, layer: int) -> bytes:
        if isinstance(value, WrittenAnswer):
            if layer == LAYER:
                return value.body
            # Read back by the method's result type, and converted as any answer is.
            value = decode_result(request, value.body)
        # The current layer takes no detour; every other is converted by name.
        if layer != LAYER:
            value = downgrade(value, layer)
        return encode_result(request, value)

    async def _invoke(self, ctx: RequestContext, request: TLObject) -> tuple[object, TLObject]:
        layer: int | None = None
        client: ClientInfo | None = None
        # Wrappers may nest in any order; each is unwrapped once per level.
        while True:
            if isinstance(request, functions.InvokeWithLayer):
                if request.layer < MIN_LAYER:
                    # Answers would hold objects a client this old cannot parse; nor
                    # is it sent updates in a layer it cannot read.
                    ctx.without_updates = True
                    raise ConnectionLayerInvalid()
                layer = request.layer  # what the client declared, for the record
                ctx.layer = served_layer(layer)  # what its answers are written in
                ctx.layer_declared = True
                request = request.query
            elif isinstance(request, functions.InitConnection):
                # The layer is the one in force now; the recorder settles the final one.
                client = ClientInfo(
                    api_id=request.api_id,
                    device_model=request.device_model,
                    system_version=request.system_version,
                    app_version=request.app_version,
                    system_lang_code=request.system_lang_code,
                    lang_pack=request.lang_pack,
                    lang_code=request.lang_code,
                    layer=ctx.layer,
                )
                request = request.query
            elif isinstance(request, functions.InvokeAfterMsg):
                await ctx.wait_for_msgs([request.msg_id])
                request = request.query
            elif isinstance(request, functions.InvokeAfterMsgs):
                await ctx.wait_for_msgs(list(request.msg_ids[:1024]))
                request = request.query
            elif isinstance(request, functions.InvokeWithoutUpdates):
                ctx.without_updates = True
                request = request.query
            elif isinstance(request, functions.InvokeWithMessagesRange):
                # History is never split into ranges here (getSplitRanges answers none),
                # so the range restricts nothing.
                request = request.query
            else:
                break
            if not isinstance(request, TLObject) or not request.IS_FUNCTION:
                raise MethodNotImplemented("query_not_a_method")
        if request.TL_NAME.startswith(FILE_QUERY_PREFIX):
            # A file transfer does not subscribe its session to updates. Clients move
            # files on sessions of their own beside the main one, on the same key (Web
            # K: a 'download' and an 'upload' session): pushed there too, each update
            # would reach the app once more, and a change the app made itself (a draft
            # it saved on its main session) would come back to it, late, as news.
            ctx.without_updates = True
        if layer is not None or client is not None:
            await self._on_connection_info(ctx, layer, client)
        method = self._registry.get(type(request))
        # Unknown methods need login too: before it, clients expect 401 (e.g. Telethon's
        # get_me() turns it into "not signed in").
        if (method is None or method.requires_auth) and ctx.user_id is None:
            # A key that gave the login code of an account with a password is not signed
            # in until it gives the password too; it is told so, not "unregistered".
            if await self._password_waiting(ctx.perm_auth_key_id, ctx.now):
                raise SessionPasswordNeeded()
            raise AuthKeyUnregistered()
        if method is None:
            raise MethodNotImplemented(request.TL_NAME)
        return await method.handler(ctx, request), request


def _catalogue_error(request: TLObject, e: DomainError) -> RpcError:
    try:
        return to_rpc_error(e)
    except KeyError:  # a domain error without a catalogue name: a bug
        log.error("unmapped domain error in %s", _method_name(request), exc_info=e)
        return Internal()


def has_nul(request: TLObject) -> bool:
    """Whether any string anywhere in the request holds a NUL character (bytes fields
    are binary and may). Iterative: the decoder already bounded the nesting and size."""
    stack: list[object] = [request]
    while stack:
        value = stack.pop()
        if value is None:
            continue
        if isinstance(value, str):
            if "\x00" in value:
                return True
        elif isinstance(value, TLObject):
            stack.extend(getattr(value, name) for name in _fields_to_walk(type(value)))
        elif isinstance(value, list):
            stack.extend(value)
    return False


# Field annotations of the generated classes that never hold a string, nor anything
# that holds one: the decoder fills each field by its schema type.
_NO_STRING = frozenset(
    f"{kind}{none}" for kind in ("int", "bool", "float", "bytes") for none in ("", " | None")
)


_WALKED: dict[type[TLObject], tuple[str, ...]] = {}  # one entry per TL class


def _fields_to_walk(cls: type[TLObject]) -> tuple[str, ...]:
    """The fields of ``cls`` that may hold a string: all of them but those annotated
    as numbers, flags or bytes (every field of a class without annotations)."""
    walked = _WALKED.get(cls)
    if walked is None:
        annotations = getattr(cls.__init__, "__annotations__", {})
        walked = tuple(name for name in cls.FIELDS if annotations.get(name) not in _NO_STRING)
        _WALKED[cls] = walked
    return walked


def _method_name(request: TLObject) -> str:
    while hasattr(request, "query") and request.TL_TYPE == "X":
        request = request.query
    return request.TL_NAME
