"""A client for the bash daemon's socket, for the operator CLI and for programs. Standard library only.

The daemon speaks MCP: newline-delimited JSON-RPC, one session per connection (see
``hive.daemon``). Calling its tools takes only the handshake (``initialize``, then
``notifications/initialized``) and ``tools/call``, so that much is spoken here, without
the ``mcp`` SDK: importing the SDK costs most of a second, which ``hive bash ls`` would
pay on every run. :func:`connect` gives a blocking client (the CLI); :func:`open_bash_client`
the same over Trio, for programs already in an event loop. Trio is imported only there.

This client is an *observer* (the operator's CLI, ``hive web``): it says so at ``initialize``
(the experimental capability :data:`OBSERVER`), and the daemon never counts an end it answers
as told to the agent. Watching, waiting on or stopping a task here leaves the agent's wake owed.
Only the agent settles its own ends: through its acknowledged wake, or an answer to its own call.

Every failure is a :class:`~hive.bash.BashError`: :class:`DaemonUnavailable` when the socket
cannot be reached or the connection is lost before the answer, :class:`BadAnswer` when the
daemon answers something that is not a tool result. A tool's own error (an unknown task, a
bad argument) is a result with ``is_error`` set, as the daemon sends it.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from hive import __version__
from hive._lines import LineBuffer, LineTooLong
from hive.bash._errors import BashError, DaemonUnavailable
from hive.daemon.protocol import METHOD_NOT_FOUND, OBSERVER

if TYPE_CHECKING:
    import trio

__all__ = [
    "BadAnswer",
    "BashClient",
    "BlockingBashClient",
    "CallResult",
    "DaemonUnavailable",
    "OBSERVER",
    "bash_session",
    "connect",
    "open_bash_client",
]

PROTOCOL_VERSION = "2025-11-25"
MAX_ANSWER = 256 * 1024 * 1024
READ_SIZE = 65536


class CallResult(NamedTuple):
    """A tool's answer: its text, its structured content, and whether it is a tool error."""

    # A NamedTuple, not attrs or a dataclass: importing either costs the CLI's start-up more
    # than the whole of this module.
    text: str
    structured: dict[str, Any]
    is_error: bool = False


class BadAnswer(BashError, ValueError):
    """The daemon answered something other than what was asked for: a JSON-RPC error, or not JSON-RPC.

    ``code`` is the JSON-RPC error code when the daemon sent one.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


# -- the protocol, without I/O --------------------------------------------------------------------


class _Session:
    """The client's half of an MCP session: what to send, and what the lines that come back mean."""

    def __init__(self, path: str, limit: int = MAX_ANSWER) -> None:
        self.path = path
        self._ids = itertools.count()
        self._lines = LineBuffer(limit)

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        request_id = next(self._ids)
        return request_id, _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    def initialize(self) -> tuple[int, bytes]:
        return self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"experimental": {OBSERVER: {}}},
                "clientInfo": {"name": "hive", "version": __version__},
            },
        )

    @staticmethod
    def initialized() -> bytes:
        return _line({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def feed(self, data: bytes) -> None:
        """Add what was read; ``b""`` (the end of the stream) before the answer means the daemon left."""
        if not data:
            raise self.lost()
        self._lines.feed(data)

    def next_line(self) -> bytes | None:
        """The next whole line read, if there is one.

        A line over the limit is a `BadAnswer` (the call it answered fails); the rest of it is
        dropped, and a later call on the same session reads on after it.
        """
        try:
            return self._lines.next_line()
        except LineTooLong as exc:
            raise BadAnswer(f"the daemon at {self.path} sent a line longer than {exc.limit} bytes") from None

    def take(self, line: bytes, request_id: int) -> tuple[dict[str, Any] | None, bytes | None]:
        """What ``line`` means while ``request_id`` is unanswered: (its result, if it is the answer;
        the reply to send, if the daemon asked something)."""
        if not line.strip():
            return None, None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            raise BadAnswer(
                f"the daemon at {self.path} sent a line that is not JSON: {line[:200]!r}"
            ) from None
        if not isinstance(message, dict):
            raise BadAnswer(
                f"the daemon at {self.path} sent JSON that is not a JSON-RPC message: {line[:200]!r}"
            )
        if "method" in message:
            # A request or a notification from the daemon. The tools send none today; a ping is
            # answered, anything else refused as JSON-RPC says, and notifications are dropped.
            if message.get("id") is None:
                return None, None
            if message["method"] == "ping":
                return None, _line({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            refusal = {
                "code": METHOD_NOT_FOUND,
                "message": f"hive's bash client has no {message['method']!r}",
            }
            return None, _line({"jsonrpc": "2.0", "id": message["id"], "error": refusal})
        if message.get("id") != request_id:
            return None, None  # an answer to nothing this client is waiting for
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else error
            raise BadAnswer(
                f"the daemon at {self.path} answered with an error: {text} (JSON-RPC error {code})",
                code if isinstance(code, int) else None,
            )
        result = message.get("result")
        if not isinstance(result, dict):
            raise BadAnswer(f"the daemon at {self.path} sent an answer with no result: {line[:200]!r}")
        return result, None

    def lost(self, exc: BaseException | None = None) -> DaemonUnavailable:
        """The connection ended (``exc``: how it broke) before the answer came."""
        how = ""
        if exc is not None:
            cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
            how = f" ({cause.strerror or cause})" if isinstance(cause, OSError) else f" ({cause})"
        return DaemonUnavailable(
            f"hive-bash-daemon at {self.path} closed the connection before answering{how}; "
            "it may have stopped or crashed (see its log)"
        )


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _tool_arguments(tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments or {}}


def _call_result(result: dict[str, Any], path: str) -> CallResult:
    content = result.get("content")
    structured = result.get("structuredContent")
    if not isinstance(content, list) or not isinstance(structured, dict | None):
        raise BadAnswer(f"the daemon at {path} sent a tool result of the wrong shape: {str(result)[:200]}")
    text = "\n".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    return CallResult(text, dict(structured or {}), bool(result.get("isError")))


def _unreachable(path: str, exc: OSError) -> DaemonUnavailable:
    return DaemonUnavailable(
        f"cannot reach hive-bash-daemon at {path}: {exc.strerror or exc}; start it with "
        "`hive-bash-daemon`, or point HIVE_BASH_SOCKET (or --socket) at its socket"
    )


# -- blocking -------------------------------------------------------------------------------------


class BlockingBashClient:
    """Calls the daemon's tools over a blocking socket, one call at a time. See :func:`connect`."""

    def __init__(self, sock: socket.socket, path: str) -> None:
        self._sock = sock
        self._session = _Session(path)

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> CallResult:
        """Call ``tool`` with ``arguments`` and wait for its answer, however long the tool takes."""
        result = self._ask(*self._session.request("tools/call", _tool_arguments(tool, arguments)))
        return _call_result(result, self._session.path)

    def _handshake(self) -> None:
        self._ask(*self._session.initialize())
        self._send(self._session.initialized())

    def _ask(self, request_id: int, data: bytes) -> dict[str, Any]:
        self._send(data)
        while True:
            while (line := self._session.next_line()) is None:
                try:
                    chunk = self._sock.recv(READ_SIZE)
                except OSError as exc:
                    raise self._session.lost(exc) from None
                self._session.feed(chunk)
            result, reply = self._session.take(line, request_id)
            if reply is not None:
                self._send(reply)
            if result is not None:
                return result

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise self._session.lost(exc) from None


@contextmanager
def connect(socket_path: str | os.PathLike[str]) -> Iterator[BlockingBashClient]:
    """Connect to the daemon at ``socket_path`` and open an MCP session on it, for the block."""
    path = os.fspath(socket_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        try:
            sock.connect(path)
        except OSError as exc:
            raise _unreachable(path, exc) from None
        client = BlockingBashClient(sock, path)
        client._handshake()
        yield client


# -- Trio -----------------------------------------------------------------------------------------


class BashClient:
    """Calls the daemon's tools over Trio; each call answers a :class:`CallResult`. See
    :func:`open_bash_client`. Calls are answered in turn, one at a time."""

    def __init__(self, stream: trio.SocketStream, path: str) -> None:
        import trio

        self._stream = stream
        self._session = _Session(path)
        self._lock = trio.Lock()
        self._closed = (trio.BrokenResourceError, trio.ClosedResourceError)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> CallResult:
        """Call ``tool`` with ``arguments`` and wait for its answer, however long the tool takes."""
        async with self._lock:
            result = await self._ask(*self._session.request("tools/call", _tool_arguments(tool, arguments)))
        return _call_result(result, self._session.path)

    async def run(
        self,
        cmd: str,
        *,
        name: str | None = None,
        timeout_secs: float | None = None,
        wait_seconds: float = 3.0,
    ) -> CallResult:
        """The ``run`` tool: start ``cmd`` in the background and wait up to ``wait_seconds`` for it.
        This client's ``run``, ``status`` and ``stop`` ask for every field (``full``)."""
        args: dict[str, Any] = {"cmd": cmd, "wait_seconds": wait_seconds, "full": True}
        if name is not None:
            args["name"] = name
        if timeout_secs is not None:
            args["timeout_secs"] = timeout_secs
        return await self.call("run", args)

    async def status(self, task_id: str, *, wait_seconds: float = 0.0) -> CallResult:
        """The ``status`` tool: the task ``task_id``, after waiting up to ``wait_seconds`` for its end."""
        return await self.call("status", {"id": task_id, "wait_seconds": wait_seconds, "full": True})

    async def stop(self, task_id: str) -> CallResult:
        """The ``stop`` tool: stop the task ``task_id``; its status once it has ended."""
        return await self.call("stop", {"id": task_id, "full": True})

    async def list(self, *, limit: int | None = None) -> CallResult:
        """The ``list`` tool: the tasks, the latest ``limit`` of them if given."""
        return await self.call("list", {} if limit is None else {"limit": limit})

    async def _handshake(self) -> None:
        await self._ask(*self._session.initialize())
        await self._send(self._session.initialized())

    async def _ask(self, request_id: int, data: bytes) -> dict[str, Any]:
        await self._send(data)
        while True:
            while (line := self._session.next_line()) is None:
                try:
                    chunk = await self._stream.receive_some(READ_SIZE)
                except self._closed as exc:
                    raise self._session.lost(exc) from None
                self._session.feed(chunk)
            result, reply = self._session.take(line, request_id)
            if reply is not None:
                await self._send(reply)
            if result is not None:
                return result

    async def _send(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except self._closed as exc:
            raise self._session.lost(exc) from None


@asynccontextmanager
async def open_bash_client(socket_path: str | os.PathLike[str]) -> AsyncIterator[BashClient]:
    """Connect to the daemon at ``socket_path`` and open an MCP session on it, for the block."""
    import trio

    path = os.fspath(socket_path)
    try:
        stream = await trio.open_unix_socket(path)
    except OSError as exc:
        raise _unreachable(path, exc) from None
    async with bash_session(stream, path) as client:
        yield client


@asynccontextmanager
async def bash_session(stream: trio.SocketStream, path: str) -> AsyncIterator[BashClient]:
    """An MCP session with the daemon on ``stream`` (connected to ``path``), for the block; the
    stream is closed at its end."""
    async with stream:
        client = BashClient(stream, path)
        await client._handshake()
        yield client
