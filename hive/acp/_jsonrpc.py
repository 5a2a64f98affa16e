"""JSON-RPC 2.0 over an agent's stdio, on Trio: newline-delimited, one reader, ordered.

One reader task applies every message in arrival order: a notification's handler runs
before anything that arrived after it, and a response wakes its waiter only after
everything before it was applied. Requests from the agent run in tasks of their own, so a
slow answer never stalls the reader. Writes are serialised. When the agent's output ends,
every waiter fails at once with the error the owner supplies (its exit status, its stderr).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from hive._lines import LineCut, LineReader, LineTooLong
from hive.acp._errors import AcpError, JsonRpcError

log = logging.getLogger(__name__)

MAX_LINE = 256 * 1024 * 1024
READ_SIZE = 1 << 20

METHOD_NOT_FOUND = -32601
INVALID_REQUEST = -32600
PARSE_ERROR = -32700
INTERNAL_ERROR = -32603

RequestHandler = Callable[[str, Any], Awaitable[Any]]
"""(method, params) -> result; raise JsonRpcError to answer with an error."""
NotificationHandler = Callable[[str, Any], Awaitable[None]]


class Unhandled(JsonRpcError):
    """Raised by a request handler for a method it does not serve: answered -32601."""

    def __init__(self, method: str) -> None:
        super().__init__(METHOD_NOT_FOUND, f"method not found: {method}")


@attrs.define(eq=False)
class Pending:
    """A request sent and not yet answered. Waiting on it may be cancelled and resumed: the
    slot stays registered, so a late answer is taken, not reported as unknown."""

    id: int
    method: str
    _done: trio.Event = attrs.field(factory=trio.Event)
    _result: Any = None
    _error: BaseException | None = None

    @property
    def done(self) -> bool:
        """Whether it has its answer (or its error)."""
        return self._done.is_set()

    def _settle(self, result: Any = None, error: BaseException | None = None) -> None:
        if not self._done.is_set():
            self._result, self._error = result, error
            self._done.set()

    async def wait(self) -> Any:
        """Its result, once answered; its error raised."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


@attrs.define(eq=False)
class Connection:
    """Both directions of one JSON-RPC peer. ``serve`` must run (in a nursery) for anything
    to arrive."""

    send_stream: trio.abc.SendStream
    receive_stream: trio.abc.ReceiveStream
    on_request: RequestHandler
    on_notification: NotificationHandler
    on_end: Callable[[], Awaitable[BaseException]]
    """Builds the error every waiter gets when the agent's output ends (its exit status...)."""
    max_line: int = MAX_LINE
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _pending: dict[int, Pending] = attrs.field(factory=dict)
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _closed: BaseException | None = None
    _handlers: trio.Nursery | None = None

    # -- sending --------------------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        if self._closed is not None:
            raise self._closed
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        async with self._send_lock:
            try:
                await self.send_stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                # The reader will see the output end too, and fail the waiters with the reason.
                raise AcpError("the ACP agent's stdin is closed: it has exited or is exiting") from None

    async def start_request(self, method: str, params: Any) -> Pending:
        """Send a request; its answer is awaited with ``Pending.wait``."""
        pending = Pending(next(self._ids), method)
        self._pending[pending.id] = pending
        try:
            await self._send({"jsonrpc": "2.0", "id": pending.id, "method": method, "params": params})
        except BaseException:
            self._pending.pop(pending.id, None)
            raise
        return pending

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result (its error raised)."""
        return await (await self.start_request(method, params)).wait()

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- receiving ------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read and apply messages until the agent's output ends; then fail every waiter."""
        async with trio.open_nursery() as handlers:
            self._handlers = handlers
            task_status.started()
            try:
                await self._read()
                self._end(await self.on_end())
            finally:
                self._end(AcpError("the connection to the ACP agent was closed"))
                handlers.cancel_scope.cancel()

    async def _read(self) -> None:
        reader = LineReader(self.receive_stream, self.max_line, read_size=READ_SIZE)
        while True:
            try:
                line = await reader.readline()
            except LineTooLong:
                # Dropped, and the messages after it are read on: the connection stays usable.
                log.error(  # noqa: TRY400 - the agent's fault, not a traceback's
                    "the agent sent a message longer than %d bytes; dropping it", self.max_line
                )
                continue
            except LineCut as exc:
                if exc.partial.strip():
                    log.warning("the agent's output ended in the middle of a message: %r", exc.partial[:200])
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if line is None:
                return
            if line.strip():
                await self._apply(line)

    async def _apply(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            log.warning("the agent wrote a line that is not JSON; skipped: %r", line[:200])
            return
        if not isinstance(message, dict):
            log.warning("the agent wrote JSON that is not a message; skipped: %r", line[:200])
            return
        if "method" in message:
            method = message["method"]
            if not isinstance(method, str):
                await self._reply_error(message.get("id"), INVALID_REQUEST, "method must be a string")
                return
            if "id" in message and message["id"] is not None:
                assert self._handlers is not None
                self._handlers.start_soon(self._answer, message["id"], method, message.get("params"))
            else:
                try:
                    await self.on_notification(method, message.get("params"))
                except AcpError as exc:
                    log.warning("cannot apply %s from the agent: %s", method, exc)
        elif "id" in message:
            self._settle(message)
        else:
            log.warning(
                "the agent wrote a message that is neither request, notification nor answer: %r", line[:200]
            )

    def _settle(self, message: dict[str, Any]) -> None:
        pending = self._pending.pop(message["id"], None) if isinstance(message["id"], int) else None
        if pending is None:
            log.warning("an answer for no request this client sent (id %r); ignored", message.get("id"))
            return
        error = message.get("error")
        if isinstance(error, dict):
            pending._settle(error=JsonRpcError.from_wire(error))
        elif "result" in message:
            pending._settle(result=message["result"])
        else:
            pending._settle(
                error=JsonRpcError(INVALID_REQUEST, "the agent's answer has neither result nor error")
            )

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        try:
            result = await self.on_request(method, params)
        except JsonRpcError as exc:
            await self._reply_error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("answering the agent's %s failed", method)
            await self._reply_error(request_id, INTERNAL_ERROR, f"the client failed: {exc}")
        else:
            await self._reply({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _reply_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self._reply({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def _reply(self, message: dict[str, Any]) -> None:
        try:
            await self._send(message)
        except AcpError:
            log.info("could not answer the agent: it has gone")

    def _end(self, error: BaseException) -> None:
        if self._closed is None:
            self._closed = error
        for pending in self._pending.values():
            pending._settle(error=self._closed)
        self._pending.clear()

    @property
    def closed(self) -> bool:
        """Whether the peer's output has ended (nothing more can be sent or awaited)."""
        return self._closed is not None
