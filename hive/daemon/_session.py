"""One MCP session on one connection: newline-delimited JSON-RPC, written on Trio.

Each tool call is answered in a task of its own, so a long call (a `status` that waits) holds up
no other (anything else is answered at once, in order); ``notifications/cancelled`` cancels the call it names, which then gets no answer. A
peer that shuts its sending side still gets the answers to what it sent; one that stops reading
ends the session. A line that is not a JSON-RPC message gets a parse error saying why, and ends
the connection.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import trio

from hive._lines import LineCut, LineReader, LineTooLong
from hive.agent_socket import answer_then_close
from hive.daemon._messages import Garbage, Misread, Notification, Request, RequestId, read_message
from hive.daemon._receipts import Receipts
from hive.daemon._tools import ToolServer, tool_result
from hive.daemon.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    OBSERVER,
    PARSE_ERROR,
    error_line,
    negotiate,
    rpc_line,
)

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 * 1024 * 1024
_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)


class _BadParams(Exception):
    """A request's params are not what its method takes (the message says what is wrong)."""


@attrs.define(eq=False)
class Session:
    """The session of one connection; :meth:`run` serves it until the peer is done."""

    stream: trio.abc.Stream
    server: ToolServer
    receipts: Receipts
    client: dict[str, Any] | None = None
    """The client's ``initialize`` params, once it sent them."""
    _calls: dict[RequestId, trio.CancelScope] = attrs.field(factory=dict)
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _over: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    @property
    def observer(self) -> bool:
        """Whether the client said at ``initialize`` that it observes (:data:`OBSERVER`). A client
        that says nothing, as the agent's own MCP client through the relay, is the agent."""
        capabilities = (self.client or {}).get("capabilities")
        experimental = capabilities.get("experimental") if isinstance(capabilities, dict) else None
        return isinstance(experimental, dict) and OBSERVER in experimental

    async def run(self) -> None:
        with self._over:
            async with trio.open_nursery() as nursery:
                if not await self._read(nursery):
                    self._over.cancel()

    async def _read(self, nursery: trio.Nursery) -> bool:
        """Read until the peer's input ends (True: the answers owed still go out) or the
        connection is to end now (False)."""
        reader = LineReader(self.stream, MAX_MESSAGE)
        while True:
            try:
                line = await reader.readline()
            except _CLOSED:
                line = None
            except LineTooLong:
                await self._refuse(f"message longer than {MAX_MESSAGE} bytes")
                return False
            except LineCut:
                line = None  # what came after the last newline is no message
            if line is None:
                self.receipts.peer_closed = True
                return True
            message = read_message(line)
            if isinstance(message, Garbage):
                await self._refuse(f"not a JSON-RPC message: {message.reason}")
                return False
            if isinstance(message, Misread):
                log.info("answered a misread message: %s", message.answer[:200])
                if not await self._send(message.answer):
                    return False
            elif isinstance(message, Request):
                if not await self._take(message, nursery):
                    return False
            elif isinstance(message, Notification):
                self._notice(message)

    async def _take(self, request: Request, nursery: trio.Nursery) -> bool:
        """Answer ``request``: a tool call in a task of its own, anything else at once, in the
        order it came (False: the peer is not reading any more)."""
        if request.method != "tools/call":
            if request.method == "initialize":
                # Before any later request is read: a call that follows knows whom it answers.
                self.client = request.params or {}
            return await self._send(await self._answer_of(request))
        scope = trio.CancelScope()
        self._calls[request.id] = scope
        nursery.start_soon(self._answer, request, scope)
        return True

    def _notice(self, notification: Notification) -> None:
        if notification.method == "notifications/cancelled":
            cancelled = (notification.params or {}).get("requestId")
            scope = self._calls.get(cancelled) if isinstance(cancelled, str | int) else None
            if scope is not None:
                scope.cancel()

    async def _answer(self, request: Request, scope: trio.CancelScope) -> None:
        answer: bytes | None = None
        with scope:
            answer = await self._answer_of(request)
        if self._calls.get(request.id) is scope:
            del self._calls[request.id]
        if scope.cancelled_caught:
            self.receipts.written(request.id, False)
            return
        assert answer is not None
        ok = await self._send(answer)
        self.receipts.written(request.id, ok)
        if not ok:
            self._over.cancel()  # the peer stopped reading: no answer reaches it any more

    async def _answer_of(self, request: Request) -> bytes:
        try:
            result = await self._result(request)
        except _BadParams as exc:
            return error_line(request.id, INVALID_PARAMS, f"Invalid params: {exc}")
        except Exception as exc:
            log.exception("a %s request failed; the daemon goes on serving", request.method)
            return error_line(request.id, INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}")
        if result is None:
            return error_line(request.id, METHOD_NOT_FOUND, "Method not found", request.method)
        return rpc_line({"jsonrpc": "2.0", "id": request.id, "result": result})

    async def _result(self, request: Request) -> dict[str, Any] | None:
        params = request.params or {}
        if request.method == "initialize":
            return {
                "protocolVersion": negotiate(params),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": self.server.server_info,
                "instructions": self.server.instructions,
            }
        if request.method == "ping":
            return {}
        if request.method == "tools/list":
            return self.server.listing()
        if request.method == "tools/call":
            return await self._call(request.id, params)
        return None

    async def _call(self, request_id: RequestId, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise _BadParams("tools/call needs the tool's name, a string; nothing was done")
        meta = params.get("_meta")
        traceparent = meta.get("traceparent") if isinstance(meta, dict) else None
        answer = await self.server.call(
            name,
            params.get("arguments"),
            traceparent if isinstance(traceparent, str) else None,
            self.client or {},
        )
        if answer.delivered is not None:
            # The end it carries is told only if this answer reaches the agent itself, still
            # there. An observer (the CLI, `hive web`) never settles it: the agent is still woken.
            if self.observer:
                answer.delivered(False)
            else:
                self.receipts.expect(request_id, answer.delivered)
        return tool_result(answer)

    async def _send(self, data: bytes) -> bool:
        """Write ``data`` whole; False if the peer is not reading any more."""
        try:
            async with self._send_lock:
                await self.stream.send_all(data)
        except _CLOSED:
            return False
        return True

    async def _refuse(self, reason: str) -> None:
        log.info("closing a connection: %s", reason)
        async with self._send_lock:
            await answer_then_close(self.stream, error_line(None, PARSE_ERROR, reason))
