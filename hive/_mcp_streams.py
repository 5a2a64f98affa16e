"""The MCP SDK's message streams of a session, fed and drained by a transport's own tasks.

The bash daemon (over each socket connection) and ``hive-subagent-mcp`` (over its stdio) frame
the JSON-RPC lines themselves, to know which answers reached a peer still there; both hand the
SDK its (read, write) streams as `session_streams` does, and both still send the answers to the
requests already read once the peer's input ends (`Unanswered`). A leaf beside the
standard-library ones because neither package may import the other; it imports Trio and the
SDK, which both already use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import mcp_types as types
import trio
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream, create_context_streams
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

Reader = Callable[[ContextSendStream[SessionMessage | Exception]], Awaitable[None]]
"""Reads the peer's messages into the session's read stream until the peer's input ends."""
Writer = Callable[[ContextReceiveStream[SessionMessage]], Awaitable[None]]
"""Writes what the session sends to the peer."""


def parse_message(line: bytes) -> types.JSONRPCMessage | ValueError | None:
    """One line a peer sent: its JSON-RPC message, the error that says why it is none, or None
    for a blank line (which is skipped)."""
    if not line.strip():
        return None
    try:
        return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc


@asynccontextmanager
async def session_streams(
    read: Reader, write: Writer
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The SDK's (read, write) message streams: ``read`` feeds the one and ``write`` drains the
    other, each in a task of its own while the caller uses them; both are cancelled as it leaves."""
    to_session, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, from_session = create_context_streams[SessionMessage](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read, to_session)
        nursery.start_soon(write, from_session)
        try:
            yield read_stream, write_stream
        finally:
            nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class Unanswered:
    """The requests read but not answered yet: their answers still go out after the peer's
    input ends (the SDK would cancel them if the session's input ended at once)."""

    _ids: set[types.RequestId] = attrs.field(factory=set)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    peer_gone: bool = False
    """The peer stopped reading: no answer reaches it any more."""

    def read(self, request_id: types.RequestId) -> None:
        """A request came: its answer is waited for."""
        self._ids.add(request_id)

    def settled(self, request_id: types.RequestId) -> None:
        """The request was answered, or cancelled (a cancelled request may get no answer)."""
        self._ids.discard(request_id)
        self._changed.set()

    def gone(self) -> None:
        """The peer stopped reading: no answer is waited for any more."""
        self.peer_gone = True
        self._changed.set()

    async def wait(self) -> None:
        """Wait until every request read is settled, or the peer has stopped reading."""
        while self._ids and not self.peer_gone:
            self._changed = trio.Event()
            await self._changed.wait()
