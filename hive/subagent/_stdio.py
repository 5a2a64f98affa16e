"""``hive-subagent-mcp``'s stdio: the SDK's message streams over its stdin and stdout, knowing
which answers reached a client still there.

The SDK's own stdio transport does the framing (one JSON-RPC message a line), but cannot say
whether an answer was written: here each answer some request asked about
(:meth:`Receipts.expect`) is reported written only when it went to stdout whole while the
client's side, stdin, was still open. A client that closed stdin has gone away (Claude Code
does so when a turn is stopped mid-tool), and one that closed stdout stopped reading: an
answer still sent then reaches nobody, and the ends it shows are told by wakes instead. This
is the bash daemon's rule for its connections (``hive.daemon.Receipts``).

The answers to requests already read still go out after stdin ends, as the bash daemon's do.
Once stdout cannot be written to, nothing more is read: the session ends, as the bash relay
does (``hive-bash-mcp``), and with it the server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import mcp_types as types
import trio
from mcp.shared._context_streams import ContextReceiveStream, ContextSendStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from hive._lines import LineCut, LineReader, LineTooLong
from hive._mcp_streams import Unanswered, parse_message, session_streams
from hive.subagent._wire import MAX_LINE

log = logging.getLogger(__name__)

OnWritten = Callable[[bool], Awaitable[None]]
_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError)
CLOSE_WITHIN = 5.0
"""How long the answers still owed word of are given to say "not written" at the end."""


@attrs.define(eq=False)
class Receipts:
    """Whether answers reached the client while it was still there, for the requests that ask."""

    _waiting: dict[types.RequestId, OnWritten] = attrs.field(factory=dict)
    client_closed: bool = False
    """Set when stdin ends: the client has gone away."""

    def expect(self, request_id: types.RequestId, on_written: OnWritten) -> None:
        """Await ``on_written(delivered)`` once the answer to ``request_id`` is written, or cannot be."""
        self._waiting[request_id] = on_written

    async def written(self, request_id: types.RequestId, ok: bool) -> None:
        on_written = self._waiting.pop(request_id, None)
        if on_written is not None:
            await on_written(ok and not self.client_closed)

    async def close(self) -> None:
        """The session is over: an answer not written by now never will be."""
        waiting, self._waiting = self._waiting, {}
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_WITHIN):
            for on_written in waiting.values():
                await on_written(False)


@attrs.define(eq=False)
class _Transport:
    stdin: trio.abc.ReceiveStream
    stdout: trio.abc.SendStream
    receipts: Receipts
    _unanswered: Unanswered = attrs.field(factory=Unanswered)
    """Its ``peer_gone``: stdout cannot be written to, the client stopped reading."""
    _reading: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Cancelled when the client stopped reading: what it still sends would reach no answer."""

    async def read(self, to_session: ContextSendStream[SessionMessage | Exception]) -> None:
        async with to_session:
            with self._reading:
                await self._read_lines(to_session)

    async def _read_lines(self, to_session: ContextSendStream[SessionMessage | Exception]) -> None:
        reader = LineReader(self.stdin, MAX_LINE)
        while True:
            try:
                line = await reader.readline()
            except LineTooLong as exc:
                log.warning("stdin: %s; the session ends", exc)
                line = None
            except (LineCut, *_CLOSED):
                line = None
            if line is None:
                await self._input_ended()
                return
            message = parse_message(line)
            if message is None:
                continue
            if isinstance(message, ValueError):
                await to_session.send(message)  # the SDK answers what it can of it, as on its own stdio
                continue
            if isinstance(message, types.JSONRPCRequest):
                self._unanswered.read(message.id)
            elif (
                isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled"
            ):
                # A cancelled request may get no answer: none is waited for.
                cancelled = (message.params or {}).get("requestId")
                if cancelled is not None:
                    self._unanswered.settled(cancelled)
            await to_session.send(SessionMessage(message))

    async def _input_ended(self) -> None:
        """The client has gone away: the answers to what it asked are still sent (to nobody)."""
        self.receipts.client_closed = True
        await self._unanswered.wait()

    async def write(self, from_session: ContextReceiveStream[SessionMessage]) -> None:
        async with from_session:
            async for session_message in from_session:
                message = session_message.message
                ok = not self._unanswered.peer_gone
                if ok:
                    data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    try:
                        await self.stdout.send_all(data)
                    except _CLOSED:
                        log.info("stdout: the client stopped reading; the session ends")
                        ok = False
                        self._unanswered.gone()
                        self._reading.cancel()
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
                    self._unanswered.settled(message.id)
                    await self.receipts.written(message.id, ok)


@asynccontextmanager
async def stdio_streams(
    stdin: trio.abc.ReceiveStream, stdout: trio.abc.SendStream, receipts: Receipts
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """The SDK's (read, write) message streams over ``stdin`` and ``stdout``; ``receipts`` learns
    whether each answer it expects reached the client."""
    transport = _Transport(stdin, stdout, receipts)
    try:
        async with session_streams(transport.read, transport.write) as streams:
            yield streams
    finally:
        await receipts.close()  # noqa: ASYNC102 - close() shields itself, with a timeout


@asynccontextmanager
async def process_stdio() -> AsyncIterator[tuple[trio.abc.ReceiveStream, trio.abc.SendStream]]:
    """This process's stdin and stdout as streams, fd 0 and 1 pointed away meanwhile (at the null
    device and stderr) so nothing else reads the client's input or writes into its output."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    async with stdin, stdout:
        yield stdin, stdout
