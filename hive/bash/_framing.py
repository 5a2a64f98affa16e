"""Newline-delimited JSON-RPC over a byte stream, as the `mcp` SDK's message streams.

The SDK's own stdio transport does this for stdin/stdout; here the same framing runs
over a Unix socket connection, for the daemon (one MCP session per connection) and for
the operator CLI's client.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import attrs
import mcp_types as types
import trio
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from hive._lines import LineCut, LineReader, LineTooLong
from hive._mcp_streams import Unanswered, parse_message, session_streams
from hive.wake import answer_then_close

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 * 1024 * 1024
_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)


def parse_error(reason: str) -> bytes:
    return _error_line(None, -32700, reason)


def _error_line(request_id: object, code: int, reason: str) -> bytes:
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": reason}}
    return json.dumps(error).encode() + b"\n"


def misread(line: bytes, message: types.JSONRPCMessage | None) -> bytes | None:
    """The answer to a line the SDK's model reads wrongly or not at all, though it is JSON: a
    request whose ``id`` is neither a string nor an integer (the model takes it for a
    notification, which is never answered), or one holding a string that is not Unicode text
    (a lone surrogate escape, which the model refuses as bad JSON). None for any other line."""
    if message is not None and not isinstance(message, types.JSONRPCNotification):
        return None
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    if message is not None:
        return _bad_id(raw["id"]) if "id" in raw else None
    return _not_text(raw.get("id")) if _holds_a_lone_surrogate(raw) else None


def _bad_id(request_id: object) -> bytes:
    return _error_line(
        None,
        -32600,
        f"Invalid Request: id must be a string or an integer, not {json.dumps(request_id)[:100]}; "
        "nothing was done",
    )


def _holds_a_lone_surrogate(raw: object) -> bool:
    try:
        json.dumps(raw, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    return False


def _not_text(request_id: object) -> bytes:
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    return _error_line(
        request_id,
        -32602,
        "Invalid params: a string in the message holds a lone surrogate escape (such as \\ud800), which is "
        "not Unicode text; send text that is valid UTF-8. Nothing was done",
    )


@attrs.define(eq=False)
class Receipts:
    """Whether answers reached a peer that was still there, for the requests that asked.

    An answer counts as delivered when it was written whole before the peer closed its side.
    A peer that closes its side first has gone away (the relay does so when its client closes
    its stdin, as Claude Code does when a turn is stopped mid-tool): an answer it is still sent
    reaches nobody. (One that closes a moment after the write may not have read it either:
    nothing can tell, so that end counts as told.)
    """

    _waiting: dict[types.RequestId, Callable[[bool], None]] = attrs.field(factory=dict)
    peer_closed: bool = False
    """Set when the reader meets the peer's end of input."""
    probe: Callable[[], bool] = lambda: False
    """Whether the peer's end of input is already waiting to be read (the reader may not have
    got to it yet)."""
    _over: bool = False

    def expect(self, request_id: types.RequestId, on_written: Callable[[bool], None]) -> None:
        """Call ``on_written(delivered)`` once the answer to ``request_id`` is written or cannot be."""
        if self._over:
            on_written(False)
        else:
            self._waiting[request_id] = on_written

    def written(self, request_id: types.RequestId, ok: bool) -> None:
        on_written = self._waiting.pop(request_id, None)
        if on_written is not None:
            on_written(ok and not self.peer_closed and not self.probe())

    def close(self) -> None:
        """The connection is over: an answer not written by now never will be."""
        self._over = True
        waiting, self._waiting = self._waiting, {}
        for on_written in waiting.values():
            on_written(False)


@attrs.define(eq=False)
class _Framer:
    stream: trio.abc.Stream
    answer_garbage: bool
    receipts: Receipts
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    # A peer that shuts its sending side (the relay, when its client closes stdin) still gets
    # the answers to the requests it sent.
    _unanswered: Unanswered = attrs.field(factory=Unanswered)

    def _note_written(self, message: types.JSONRPCMessage, *, ok: bool) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self.receipts.written(message.id, ok)

    def _note_outgoing(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._unanswered.settled(message.id)

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            await self.stream.send_all(data)

    async def read_lines(self, to_session: ContextSendStream[SessionMessage | Exception]) -> None:
        reader = LineReader(self.stream, MAX_MESSAGE)
        # Each request takes the receipts to its handler (the SDK's `ctx.request`).
        metadata = ServerMessageMetadata(request_context=self.receipts)
        async with to_session:
            while True:
                try:
                    line = await reader.readline()
                except _CLOSED:
                    self.receipts.peer_closed = True
                    return
                except LineTooLong:
                    await self._refuse(f"message longer than {MAX_MESSAGE} bytes")
                    return
                except LineCut:
                    line = None  # what came after the last newline is no message
                if line is None:
                    self.receipts.peer_closed = True
                    await self._unanswered.wait()
                    return
                message = parse_message(line)
                if message is None:
                    continue
                if isinstance(message, ValueError):
                    answer = misread(line, None) if self.answer_garbage else None
                    if answer is None:
                        await self._refuse(f"not a JSON-RPC message: {_first_line(message)}")
                        return
                    await self._answer_misread(answer)
                    continue
                if self.answer_garbage and isinstance(message, types.JSONRPCNotification):
                    answer = misread(line, message)
                    if answer is not None:
                        await self._answer_misread(answer)
                        continue
                if self.answer_garbage and isinstance(message, types.JSONRPCRequest):
                    self._unanswered.read(message.id)
                await to_session.send(SessionMessage(message, metadata))

    async def _answer_misread(self, answer: bytes) -> None:
        log.info("answered a misread message: %s", answer[:200])
        with contextlib.suppress(*_CLOSED):
            await self._send(answer)

    async def _refuse(self, reason: str) -> None:
        log.info("closing a connection: %s", reason)
        if not self.answer_garbage:
            return
        async with self._send_lock:
            await answer_then_close(self.stream, parse_error(reason))

    async def write_lines(self, from_session: ContextReceiveStream[SessionMessage]) -> None:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                try:
                    await self._send(data + b"\n")
                except _CLOSED:
                    self._unanswered.gone()
                    self._note_written(message.message, ok=False)
                    return
                self._note_written(message.message, ok=True)
                self._note_outgoing(message.message)


@asynccontextmanager
async def message_streams(
    stream: trio.abc.Stream, *, answer_garbage: bool, receipts: Receipts | None = None
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The SDK's (read, write) message streams over ``stream``.

    ``receipts`` learns whether each answer was written to a peer still there; it comes with
    each request, so that its handler finds it as ``ctx.request``.
    A line that is not a JSON-RPC message ends the connection: with ``answer_garbage``
    (the server side) the peer is first sent a JSON-RPC parse error saying why. The read
    stream ends when the peer closes its side or the connection breaks.
    """
    framer = _Framer(stream, answer_garbage, receipts if receipts is not None else Receipts())
    with contextlib.ExitStack() as closing:
        if isinstance(stream, trio.SocketStream):
            # A second handle on the connection, for peeking without trio's socket wrapper.
            peek = closing.enter_context(socket.socket(fileno=os.dup(stream.socket.fileno())))
            framer.receipts.probe = functools.partial(_peer_has_closed, peek)
        try:
            async with session_streams(framer.read_lines, framer.write_lines) as streams:
                yield streams
        finally:
            framer.receipts.close()


def _peer_has_closed(sock: socket.socket) -> bool:
    """Whether the next thing to read on ``sock`` is the peer's end of input (or an error)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
