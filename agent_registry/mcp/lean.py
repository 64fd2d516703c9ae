"""The lean path: a plain ``tools/call`` or ``ping`` answered from the wire by the SDK's
own handler, without the SDK session's dispatch around it.

The SDK's session turns each request line into pydantic models, passes it through
memory streams, a dispatcher task, a request context and middleware, about ten
event-loop turns: a millisecond of a warm claim's round trip, more than half of what a
claim itself costs (docs/benchmarks.md, the fifth pass).  Once the session is
initialized, a request that the SDK would answer with nothing but its handler is
answered here instead: the handler the SDK registered for the method, given the params
model the SDK validates, its result shaped for the negotiated protocol version by the
SDK's own serializer and written as the SDK's dispatcher writes it; a failure answered
by the SDK's own exception-to-error ladder.

Everything else goes to the SDK's session untouched: the handshake, notifications
(cancellation included), batches, a request carrying ``_meta`` (a progress token, a
trace context, the 2026 envelope) or any field besides ``name`` and ``arguments``, a
request read while another line already waits behind it (a cancellation of it could be
there), a session in the 2026 era, a server whose middleware does more than the SDK's
defaults do untraced, and every call while *inline* says no (the tools then run in a
worker thread: the session keeps reading meanwhile and can cancel them).  A call is
taken only after the SDK answered ``initialize`` and the client sent
``notifications/initialized``; a second ``initialize`` hands everything back to the SDK.
The handlers here take no request context (ours use none).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (INTERNAL_ERROR, METHOD_NOT_FOUND, ErrorData, JSONRPCError,
                       JSONRPCResponse)
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

logger = logging.getLogger(__name__)

# method -> the params keys a request may carry and still be answered here
TAKEN = {"tools/call": frozenset({"name", "arguments"}), "ping": frozenset()}
ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
# what MCPServer installs; untraced, each passes a request without requestState through
DEFAULT_MIDDLEWARE = [OpenTelemetryMiddleware, RequestStateBoundary]


class LeanCalls:
    """The lean path of one stdio session of the low-level SDK server *lowlevel*."""

    def __init__(self, lowlevel: Server, inline: Callable[[], bool]) -> None:
        self.lowlevel = lowlevel
        self.inline = inline
        self.opening: Any = None  # the id of the initialize request the SDK is answering
        self.version: str | None = None  # the protocol version the SDK negotiated
        self.initialized = False
        self.off = not self.vouched()

    def vouched(self) -> bool:
        """Whether the SDK would do nothing around these handlers but what is done here:
        its default middleware, no tracer provider set, no cache hint on these methods."""
        return ([type(m) for m in self.lowlevel.middleware] == DEFAULT_MIDDLEWARE
                and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
                and not set(TAKEN) & set(self.lowlevel.cache_hints))

    # -- watching the handshake ---------------------------------------------------------
    def heard(self, message: Any) -> None:
        """Follow the handshake in what the client sends."""
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method == "initialize":
            if self.opening is not None or self.version is not None:
                self.off = True  # a second handshake: the SDK's to follow
            self.opening = message.get("id", False)
        elif method == "notifications/initialized":
            self.initialized = True

    def said(self, line: str) -> None:
        """Follow the handshake in what the SDK writes: its answer to initialize."""
        if self.off or self.opening is None or self.version is not None:
            return
        try:
            message = from_json(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("id") != self.opening:
            return
        version = (message.get("result") or {}).get("protocolVersion")
        if version in HANDSHAKE_PROTOCOL_VERSIONS:
            self.version = version
        else:
            self.off = True

    # -- answering ----------------------------------------------------------------------
    async def take(self, line: str, more_waiting: bool) -> str | None:
        """The answer line to *line*, or None when the SDK's session is to have it."""
        try:
            message = from_json(line)
        except ValueError:
            return None
        self.heard(message)
        if self.off or self.version is None or not self.initialized or more_waiting:
            return None
        if not self.plain(message) or not self.inline():
            return None
        return await self.answer(message["id"], message["method"], message.get("params"))

    @staticmethod
    def plain(message: Any) -> bool:
        """Whether *message* is a request this path takes: JSON-RPC 2.0, a string or
        integer id, one of the TAKEN methods with only the params it allows."""
        if not isinstance(message, dict) or not message.keys() <= ENVELOPE:
            return False
        method = message.get("method")
        allowed = TAKEN.get(method) if isinstance(method, str) else None
        params = message.get("params")
        return allowed is not None and message.get("jsonrpc") == "2.0" \
            and type(message.get("id")) in (int, str) \
            and (params is None or isinstance(params, dict) and params.keys() <= allowed) \
            and ("name" not in allowed or _call_params(params))

    async def answer(self, rid: int | str, method: str, params: dict | None) -> str:
        """What the SDK's dispatcher would write for request *rid*: the handler's result
        shaped for the negotiated version, or the error the SDK's ladder maps it to."""
        entry = self.lowlevel.get_request_handler(method)
        try:
            if entry is None:
                raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)
            validate_client_request(method, self.version, params)
            typed = entry.params_type.model_validate({} if params is None else params,
                                                     by_name=False)
            result = await entry.handler(None, typed)
            if isinstance(result, ErrorData):
                raise MCPError.from_error_data(result)
            shaped = self.shaped(method, result)
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:  # the dispatcher's catch-all, code 0 as the SDK pins it
                logger.exception("handler for %r raised", method)
                error = ErrorData(code=0, message=str(exc))
            return JSONRPCError(jsonrpc="2.0", id=rid, error=error).model_dump_json(
                by_alias=True, exclude_unset=True) + "\n"
        return JSONRPCResponse(jsonrpc="2.0", id=rid, result=shaped).model_dump_json(
            by_alias=True, exclude_unset=True) + "\n"

    def shaped(self, method: str, result: Any) -> dict[str, Any]:
        """*result* as the SDK's runner shapes it for a handshake-era session."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True) \
            if isinstance(result, BaseModel) else dict(result or {})
        try:
            return serialize_server_result(method, self.version, dumped)
        except ValidationError:
            logger.exception("handler for %r returned an invalid result", method)
            raise MCPError(code=INTERNAL_ERROR,
                           message="Handler returned an invalid result") from None


def _call_params(params: dict | None) -> bool:
    return params is not None and type(params.get("name")) is str \
        and isinstance(params.get("arguments", {}), dict)
