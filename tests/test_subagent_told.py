"""An answer that shows subagent ends tells them only when it reached an MCP client still there:
the daemon waits for ``hive-subagent-mcp``'s word, which it gives once it wrote the answer to its
stdout while its stdin was open. And an over-long line on ``subagent.sock`` gets an answer."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from hive._unix import open_unix_listener
from hive.subagent import daemon
from hive.subagent._stdio import Receipts, stdio_streams
from hive.subagent._tools import Result
from hive.subagent._wire import (
    MAX_LINE,
    Answer,
    Call,
    Caller,
    Written,
    decode_answer,
    decode_call,
    decode_written,
    encode,
)
from hive.subagent.server import make_server
from hive.wake import LineReader

WITHIN = 10


@attrs.define(eq=False)
class Tools:
    """Answers every call with an answer that shows ends; notes what became of each."""

    delivered: list[bool] = attrs.field(factory=list)
    settled: trio.Event = attrs.field(factory=trio.Event)

    async def call(self, call: Call) -> Result:
        def delivered(ok: bool) -> None:
            self.delivered.append(ok)
            self.settled.set()

        return Result(Answer("an end", {"message": "an end"}), delivered)


@asynccontextmanager
async def daemon_serving(path: Path, tools: object) -> AsyncIterator[None]:
    handler = daemon._connection_handler(tools, 60.0)  # type: ignore[arg-type]
    async with open_unix_listener(path, known_as="test") as listener, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handler, [listener])
        yield
        nursery.cancel_scope.cancel()


def status(caller: str = "/") -> bytes:
    return encode(Call("status", {}, Caller(cwd=caller)))


async def test_the_daemon_counts_an_end_told_only_on_the_client_s_word(short_tmp: Path) -> None:
    tools = Tools()
    path = short_tmp / "subagent.sock"
    with trio.fail_after(WITHIN):
        async with daemon_serving(path, tools):
            for word, expected in ((None, False), (Written(True), True), (Written(False), False)):
                tools.settled = trio.Event()
                async with await trio.open_unix_socket(str(path)) as stream:
                    await stream.send_all(status())
                    line = await LineReader(stream).readline()
                    assert line is not None and decode_answer(line).confirm
                    if word is not None:
                        await stream.send_all(encode(word))
                # Closing without a word: the answer reached nobody that said so.
                await tools.settled.wait()
                assert tools.delivered[-1] is expected
            # A client that sends its next call instead of the word has not confirmed; the call is answered.
            tools.settled = trio.Event()
            async with await trio.open_unix_socket(str(path)) as stream:
                reader = LineReader(stream)
                await stream.send_all(status())
                assert await reader.readline() is not None
                await stream.send_all(status())
                await tools.settled.wait()
                assert tools.delivered[-1] is False
                assert await reader.readline() is not None
    assert tools.delivered == [False, True, False, False, False]  # the last: its connection closed


@attrs.define(eq=False)
class FakeDaemon:
    """A subagent daemon that answers each call with an end to confirm, when told to."""

    called: trio.Event = attrs.field(factory=trio.Event)
    answer_now: trio.Event = attrs.field(factory=trio.Event)
    words: list[bool] = attrs.field(factory=list)
    heard: trio.Event = attrs.field(factory=trio.Event)

    async def serve(self, stream: trio.SocketStream) -> None:
        async with stream:
            reader = LineReader(stream, MAX_LINE)
            line = await reader.readline()
            assert line is not None
            decode_call(line)
            self.called.set()
            await self.answer_now.wait()
            await stream.send_all(encode(Answer("the end of w", {"message": "the end of w"}, confirm=True)))
            try:
                word = await reader.readline()
            except trio.BrokenResourceError:
                word = None
            self.words.append(word is not None and decode_written(word).written)
            self.heard.set()


@attrs.define
class Pipes:
    """hive-subagent-mcp's stdin and stdout as pipes: the server's ends and the client's."""

    server_in: trio.lowlevel.FdStream
    server_out: trio.lowlevel.FdStream
    client_in: trio.lowlevel.FdStream
    client_out: trio.lowlevel.FdStream


def pipes() -> Pipes:
    to_server_r, to_server_w = os.pipe()
    to_client_r, to_client_w = os.pipe()
    fd = trio.lowlevel.FdStream
    return Pipes(fd(to_server_r), fd(to_client_w), fd(to_client_r), fd(to_server_w))


@asynccontextmanager
async def mcp_over_pipes(short_tmp: Path, fake: FakeDaemon) -> AsyncIterator[tuple[Pipes, ClientSession]]:
    path = short_tmp / "subagent.sock"
    p = pipes()
    receipts = Receipts()
    server = make_server(short_tmp, path, Caller(cwd=str(short_tmp)), receipts)
    async with (
        open_unix_listener(path, known_as="test") as listener,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(trio.serve_listeners, fake.serve, [listener])

        async def run_server() -> None:
            async with (
                p.server_in,
                p.server_out,
                stdio_streams(p.server_in, p.server_out, receipts) as (r, w),
            ):
                await server.run(r, w, server.create_initialization_options())

        nursery.start_soon(run_server)
        async with (
            stdio_streams(p.client_in, p.client_out, Receipts()) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield p, session
            nursery.cancel_scope.cancel()


async def test_an_answer_written_to_a_client_still_there_is_confirmed(short_tmp: Path) -> None:
    fake = FakeDaemon()
    fake.answer_now.set()
    with trio.fail_after(WITHIN):
        async with mcp_over_pipes(short_tmp, fake) as (_pipes, session):
            result = await session.call_tool("status", {"name": "w", "wait_seconds": 10})
            assert result.structured_content == {"message": "the end of w"}
            await fake.heard.wait()
    assert fake.words == [True]


async def test_an_answer_to_a_client_that_closed_its_output_is_not_confirmed(short_tmp: Path) -> None:
    """The client closed hive-subagent-mcp's stdin (as Claude Code does when a turn is stopped
    mid-tool) while status waited: the answer still goes out, but it tells no end."""
    fake = FakeDaemon()
    with trio.fail_after(WITHIN):
        async with mcp_over_pipes(short_tmp, fake) as (p, session), trio.open_nursery() as nursery:
            answered = trio.Event()
            await session.list_tools()  # what the client checks a result against, before it can no longer ask

            async def ask() -> None:
                await session.call_tool("status", {"name": "w", "wait_seconds": 10})
                answered.set()

            nursery.start_soon(ask)
            await fake.called.wait()
            await p.client_out.aclose()
            fake.answer_now.set()
            await fake.heard.wait()
            await answered.wait()  # the client still reads: it got the answer
    assert fake.words == [False]


async def test_an_answer_to_a_client_that_stopped_reading_is_not_confirmed(short_tmp: Path) -> None:
    """The client closed hive-subagent-mcp's stdout while status waited: the write fails, the
    daemon hears so, and the end is told by a wake."""
    fake = FakeDaemon()
    with trio.fail_after(WITHIN):
        async with mcp_over_pipes(short_tmp, fake) as (p, session), trio.open_nursery() as nursery:

            async def ask() -> None:
                with contextlib.suppress(MCPError):  # its input is closed: it never sees the answer
                    await session.call_tool("status", {"name": "w", "wait_seconds": 10})

            nursery.start_soon(ask)
            await fake.called.wait()
            await p.client_in.aclose()
            fake.answer_now.set()
            await fake.heard.wait()
            nursery.cancel_scope.cancel()
    assert fake.words == [False]


async def test_hive_subagent_mcp_ends_when_its_stdout_is_closed(short_tmp: Path) -> None:
    """The client closed hive-subagent-mcp's stdout and still holds its stdin open: the first
    answer cannot be written, and the server ends, as the bash relay does."""
    argv = [sys.executable, "-m", "hive.subagent.server", "--state-dir", str(short_tmp)]
    server = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    await server.stdout.aclose()
    try:
        # A guard only: the server imports the mcp SDK before it reads (seconds, under load).
        with trio.fail_after(60):
            await server.stdin.send_all(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            assert await server.wait() == 0
    finally:
        await server.stdin.aclose()  # how a server that kept running is ended
        await server.wait()


# -- an over-long line -----------------------------------------------------------------------------


def over_long(extra: int) -> bytes:
    return b'{"tool":"status","arguments":{"x":"' + b"a" * (MAX_LINE + extra) + b'"}}\n'


async def test_a_line_over_the_limit_is_answered_is_error_before_the_connection_closes(
    short_tmp: Path,
) -> None:
    path = short_tmp / "subagent.sock"
    with trio.fail_after(WITHIN):
        async with (
            daemon_serving(path, Tools()),
            await trio.open_unix_socket(str(path)) as stream,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(stream.send_all, over_long(1))
            line = await LineReader(stream).readline()
            assert line is not None
            answer = decode_answer(line)
            assert answer.is_error
            assert f"longer than {MAX_LINE} bytes" in answer.text
            assert await LineReader(stream).readline() is None  # then the daemon closes


@settings(max_examples=3, deadline=None)
@given(extra=st.integers(min_value=1, max_value=200_000))
def test_any_over_long_line_gets_an_answer_not_a_reset(extra: int) -> None:
    async def main() -> None:
        path = Path(tempfile.mkdtemp(prefix="hive-long-", dir="/tmp")) / "subagent.sock"
        with trio.fail_after(WITHIN):
            async with daemon_serving(path, Tools()):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(str(path))
                try:
                    await trio.to_thread.run_sync(sock.sendall, over_long(extra))
                    data = await trio.to_thread.run_sync(sock.recv, 65536)
                finally:
                    sock.close()
                assert decode_answer(data.split(b"\n")[0]).is_error

    trio.run(main)
