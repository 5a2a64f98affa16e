"""Newline-delimited JSON-RPC over a byte stream, as the `mcp` SDK's message streams.

The SDK's own stdio transport does this for stdin/stdout; here the same framing runs
over a Unix socket connection, for the daemon (one MCP session per connection) and for
the operator CLI's client.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import mcp_types as types
import trio
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream, create_context_streams
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 * 1024 * 1024
LINGER = 2.0
_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)


def parse_error(reason: str) -> bytes:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": reason}}
    return json.dumps(error).encode() + b"\n"


@attrs.define(eq=False)
class _Framer:
    stream: trio.abc.Stream
    answer_garbage: bool
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock)
    # Requests read but not yet answered. A peer that shuts its sending side (the relay,
    # when its client closes stdin) still gets these answers: the SDK would cancel them
    # if the session's input ended at once.
    _unanswered: set[types.RequestId] = attrs.field(factory=set)
    _answered: trio.Event = attrs.field(factory=trio.Event)
    _peer_gone: bool = False

    async def _wait_for_answers(self) -> None:
        while self._unanswered and not self._peer_gone:
            self._answered = trio.Event()
            await self._answered.wait()

    def _note_outgoing(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self._unanswered.discard(message.id)
            self._answered.set()

    async def _send(self, data: bytes) -> None:
        async with self._send_lock:
            await self.stream.send_all(data)

    async def read_lines(self, to_session: ContextSendStream[SessionMessage | Exception]) -> None:
        buffer = bytearray()
        async with to_session:
            while True:
                try:
                    data = await self.stream.receive_some(65536)
                except _CLOSED:
                    return
                if not data:
                    await self._wait_for_answers()
                    return
                buffer += data
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:
                        await self._refuse(f"not a JSON-RPC message: {_first_line(exc)}")
                        return
                    if self.answer_garbage and isinstance(message, types.JSONRPCRequest):
                        self._unanswered.add(message.id)
                    await to_session.send(SessionMessage(message))
                if len(buffer) > MAX_MESSAGE:
                    await self._refuse(f"message longer than {MAX_MESSAGE} bytes")
                    return

    async def _refuse(self, reason: str) -> None:
        log.info("closing a connection: %s", reason)
        if not self.answer_garbage:
            return
        with contextlib.suppress(*_CLOSED):
            await self._send(parse_error(reason))
            # Closing with unread input would reset the connection and lose the answer, so
            # take (and drop) what the peer is still sending, for a moment.
            if isinstance(self.stream, trio.abc.HalfCloseableStream):
                await self.stream.send_eof()
            with trio.move_on_after(LINGER):
                while await self.stream.receive_some(65536):
                    pass

    async def write_lines(self, from_session: ContextReceiveStream[SessionMessage]) -> None:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                try:
                    await self._send(data + b"\n")
                except _CLOSED:
                    self._peer_gone = True
                    self._answered.set()
                    return
                self._note_outgoing(message.message)


@asynccontextmanager
async def message_streams(
    stream: trio.abc.Stream, *, answer_garbage: bool
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The SDK's (read, write) message streams over ``stream``.

    A line that is not a JSON-RPC message ends the connection: with ``answer_garbage``
    (the server side) the peer is first sent a JSON-RPC parse error saying why. The read
    stream ends when the peer closes its side or the connection breaks.
    """
    to_session, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, from_session = create_context_streams[SessionMessage](0)
    framer = _Framer(stream, answer_garbage)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(framer.read_lines, to_session)
        nursery.start_soon(framer.write_lines, from_session)
        try:
            yield read_stream, write_stream
        finally:
            nursery.cancel_scope.cancel()


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
