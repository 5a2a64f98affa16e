"""hive-subagent-mcp, the kit's relay, in front of a kit server: the caller reaches the daemon in
the relayed ``initialize``, and an answer that carries an end tells it only when it reached the
agent, still there (the relay's client). Where the client has gone (it closed the relay's stdin,
or its stdout), the end is told by a wake instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from hive.daemon import ToolServer, serve_connection
from hive.daemon.relay import CALLER_META
from tests.helpers.jsonrpc import initialize, notification, request

WITHIN = 30


@attrs.frozen
class Answer:
    text: str
    structured: dict[str, Any]
    is_error: bool = False
    delivered: Any = None


@attrs.define(eq=False)
class Watched(trio.abc.Stream):
    """A connection that says when its peer's input ended (the relay's client went away)."""

    inner: trio.SocketStream
    ended: trio.Event

    @property
    def socket(self) -> Any:
        return self.inner.socket

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        try:
            data = await self.inner.receive_some(max_bytes)
        except trio.BrokenResourceError:  # a peer gone with our answers unread resets the connection
            self.ended.set()
            raise
        if not data:
            self.ended.set()
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


@attrs.define(eq=False)
class Daemon:
    """A kit server whose `status` answers, once released, with an end; it notes what became of it."""

    called: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)
    peer_gone: trio.Event = attrs.field(factory=trio.Event)
    settled: trio.Event = attrs.field(factory=trio.Event)
    delivered: list[bool] = attrs.field(factory=list)
    callers: list[Any] = attrs.field(factory=list)

    async def call(self, name: str, arguments: Any, _span: str | None, client: Mapping[str, Any]) -> Answer:
        self.callers.append(client.get("_meta", {}).get(CALLER_META))
        self.called.set()
        await self.release.wait()

        def delivered(ok: bool) -> None:
            self.delivered.append(ok)
            self.settled.set()

        return Answer("the end of w", {"message": "the end of w"}, delivered=delivered)

    def server(self) -> ToolServer:
        return ToolServer("subagent", instructions="", tools=[{"name": "status"}], call_tool=self.call)


@asynccontextmanager
async def relayed(short_tmp: Path, daemon: Daemon) -> AsyncIterator[trio.Process]:
    """The daemon on ``<short_tmp>/subagent.sock``, and hive-subagent-mcp in front of it (it starts
    none: the outage file says the daemon is someone else's), its handshake and a status call sent."""
    path = short_tmp / "subagent.sock"
    listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await listener.bind(str(path))
    listener.listen(4)

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await serve_connection(Watched(stream, daemon.peer_gone), daemon.server())  # type: ignore[arg-type]

    argv = [sys.executable, "-m", "hive.subagent.relay", "--socket", str(path)]
    argv += ["--state-dir", str(short_tmp), "--outage-file", str(short_tmp / "down")]
    env = {**os.environ, "HIVE_AGENT_SOCKET": str(short_tmp / "agent.sock")}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, serve, [trio.SocketListener(listener)])
        relay = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=short_tmp, env=env
        )
        assert relay.stdin is not None
        lines = [initialize(1), notification("notifications/initialized")]
        lines.append(
            request(2, "tools/call", {"name": "status", "arguments": {"name": "w", "wait_seconds": 10}})
        )
        await relay.stdin.send_all(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        await daemon.called.wait()
        assert relay.stdout is not None
        said = b""
        while b"\n" not in said:  # the answer to initialize: nothing more is owed the client but status's
            said += await relay.stdout.receive_some()
        try:
            yield relay
        finally:
            with trio.CancelScope(shield=True):
                await relay.stdin.aclose()
                await relay.wait()
            nursery.cancel_scope.cancel()


async def answers(relay: trio.Process) -> list[dict[str, Any]]:
    assert relay.stdout is not None
    data = b""  # after the answer to initialize
    async for chunk in relay.stdout:
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


async def test_the_caller_reaches_the_daemon_and_an_answer_to_a_client_still_there_tells_the_end(
    short_tmp: Path,
) -> None:
    daemon = Daemon()
    with trio.fail_after(WITHIN):
        async with relayed(short_tmp, daemon) as relay:
            daemon.release.set()
            await daemon.settled.wait()
            assert relay.stdin is not None
            await relay.stdin.aclose()
            got = await answers(relay)
    assert daemon.delivered == [True]
    assert got[0]["result"]["structuredContent"] == {"message": "the end of w"}
    (caller,) = daemon.callers
    assert caller["cwd"] == str(short_tmp) and caller["agent_socket"] == str(short_tmp / "agent.sock")
    assert caller["env"]["HIVE_AGENT_SOCKET"] == str(short_tmp / "agent.sock")
    assert (caller["permission"], caller["idle_timeout"]) == ("default", None)


@pytest.mark.parametrize("closed", ["stdin", "stdout"])
async def test_an_answer_to_a_client_that_went_away_tells_no_end(short_tmp: Path, closed: str) -> None:
    """The client closed hive-subagent-mcp's stdin (as Claude Code does when a turn is stopped
    mid-tool), or its stdout (it stopped reading), while status waited: the daemon hears that
    its peer has gone before the answer is written, and the end is told by a wake."""
    daemon = Daemon()
    with trio.fail_after(WITHIN):
        async with relayed(short_tmp, daemon) as relay:
            assert relay.stdin is not None and relay.stdout is not None
            await (relay.stdin if closed == "stdin" else relay.stdout).aclose()
            await daemon.peer_gone.wait()
            daemon.release.set()
            await daemon.settled.wait()
    assert daemon.delivered == [False]
