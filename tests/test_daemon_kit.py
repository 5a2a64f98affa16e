"""hive.daemon, the kit's MCP server: a tool set served on a Unix socket without the MCP SDK, spoken
to by the SDK's own client through the real stdio relay, and line by line where the wire is the point."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio
from hypothesis import given
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hive import __version__
from hive.daemon import OBSERVER, ToolServer, read_message, serve_connection, serve_mcp
from tests.helpers.daemon import relay_argv
from tests.helpers.jsonrpc import initialize, notification, request

GUARD = 20
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ANSWER = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


@attrs.frozen
class Answer:
    text: str
    structured: dict[str, Any] | None
    is_error: bool = False
    delivered: Callable[[bool], None] | None = None


@attrs.define
class Echo:
    """A tool set: `echo` says its text, `shout` says it as an error, `hold` waits until cancelled,
    `owed` answers with an end whose delivery it records."""

    calls: list[tuple[str, Any, str | None]] = attrs.field(factory=list)
    clients: list[Any] = attrs.field(factory=list)
    held: trio.Event = attrs.field(factory=trio.Event)
    cancelled: trio.Event = attrs.field(factory=trio.Event)
    deliveries: list[bool] = attrs.field(factory=list)
    told: trio.Event = attrs.field(factory=trio.Event)

    def deliver(self, delivered: bool) -> None:
        self.deliveries.append(delivered)
        self.told.set()

    async def call(self, name: str, arguments: Any, traceparent: str | None, client: Any) -> Answer:
        self.calls.append((name, arguments, traceparent))
        self.clients.append(client)
        if name == "hold":
            self.held.set()
            try:
                await trio.sleep_forever()
            finally:
                self.cancelled.set()
        if name == "owed":
            return Answer("an end", {"message": "an end"}, delivered=self.deliver)
        if name not in ("echo", "shout"):
            return Answer(f"no tool {name}", {"message": f"no tool {name}"}, is_error=True)
        text = str(arguments["text"])
        return Answer(text, {"message": text}, is_error=name == "shout")

    def server(self) -> ToolServer:
        declared = {"name": "echo", "description": "Say it.", "input_schema": SCHEMA, "output_schema": ANSWER}
        wire = {"name": "shout", "description": "Say it loud.", "inputSchema": SCHEMA, "outputSchema": ANSWER}
        others = [
            {"name": name, "description": name, "input_schema": {"type": "object"}}
            for name in ("hold", "owed")
        ]
        return ToolServer(
            "test", instructions="Try echo.", tools=[declared, wire, *others], call_tool=self.call
        )


@asynccontextmanager
async def served(tools: Echo, path: Path) -> AsyncIterator[None]:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(16)
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_mcp, trio.SocketListener(sock), tools.server())
        yield
        nursery.cancel_scope.cancel()


async def test_the_sdks_client_through_the_relay_initializes_lists_and_calls(short_tmp: Path) -> None:
    tools = Echo()
    path = short_tmp / "kit.sock"
    argv = relay_argv(path)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    with trio.fail_after(GUARD), open(short_tmp / "relay.err", "a") as errlog:
        async with (
            served(tools, path),
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            started = await session.initialize()
            assert (started.server_info.name, started.server_info.version) == ("test", __version__)
            assert started.instructions == "Try echo."
            assert started.capabilities.tools is not None
            listing = await session.list_tools()
            assert [(t.name, t.input_schema, t.output_schema) for t in listing.tools][:2] == [
                ("echo", SCHEMA, ANSWER),
                ("shout", SCHEMA, ANSWER),
            ]
            said = await session.call_tool("echo", {"text": "hi"}, meta={"traceparent": "00-abc-def-01"})
            assert said.content == [types.TextContent(type="text", text="hi")]
            assert said.structured_content == {"message": "hi"} and not said.is_error
            assert (await session.call_tool("shout", {"text": "no"})).is_error
            await session.send_ping()
    assert tools.calls[:2] == [("echo", {"text": "hi"}, "00-abc-def-01"), ("shout", {"text": "no"}, None)]


@attrs.define
class Peer:
    """The client's end of a connection served by the kit, spoken in raw lines."""

    stream: trio.SocketStream
    buffer: bytearray = attrs.field(factory=bytearray)

    async def send(self, *messages: Any) -> None:
        await self.stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def receive(self) -> dict[str, Any]:
        while (end := self.buffer.find(b"\n")) < 0:
            data = await self.stream.receive_some(65536)
            assert data, "the server closed the connection"
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        answer: dict[str, Any] = json.loads(line)
        return answer


@asynccontextmanager
async def connected(tools: Echo) -> AsyncIterator[Peer]:
    left, right = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await serve_connection(stream, tools.server())

    async with trio.open_nursery() as nursery, trio.SocketStream(right) as client:
        nursery.start_soon(serve, trio.SocketStream(left))
        yield Peer(client)
        nursery.cancel_scope.cancel()


async def test_initialize_answers_the_clients_version_if_spoken_else_the_newest() -> None:
    with trio.fail_after(GUARD):
        async with connected(Echo()) as peer:
            asked = initialize(1)
            asked["params"]["protocolVersion"] = "2024-11-05"
            await peer.send(asked)
            assert (await peer.receive())["result"]["protocolVersion"] == "2024-11-05"
            asked["id"], asked["params"]["protocolVersion"] = 2, "1999-01-01"
            await peer.send(asked)
            result = (await peer.receive())["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"] == {"name": "test", "version": __version__}


async def test_a_cancelled_call_is_cancelled_and_unanswered_and_the_session_goes_on() -> None:
    tools = Echo()
    with trio.fail_after(GUARD):
        async with connected(tools) as peer:
            await peer.send(initialize(1), notification("notifications/initialized"))
            await peer.receive()
            await peer.send(request(2, "tools/call", {"name": "hold", "arguments": {}}))
            await tools.held.wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
            await peer.send(cancel)
            await tools.cancelled.wait()
            await peer.send(request(3, "ping"))
            assert await peer.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_unknown_methods_bad_params_and_bad_arguments_get_errors_that_say_so() -> None:
    with trio.fail_after(GUARD):
        async with connected(Echo()) as peer:
            await peer.send(request(1, "resources/list"))
            unknown = await peer.receive()
            await peer.send(request(2, "tools/call", {"arguments": {}}))
            nameless = await peer.receive()
            await peer.send(request(3, "tools/call", {"name": "echo", "arguments": "hi"}))
            refused = (await peer.receive())["result"]
            await peer.send(request(4, "tools/call", {"name": "nope", "arguments": "hi"}))
            missing = (await peer.receive())["result"]
    assert unknown["error"]["code"] == -32601 and unknown["error"]["data"] == "resources/list"
    assert nameless["error"]["code"] == -32602 and "name" in nameless["error"]["message"]
    assert refused["isError"] and refused["structuredContent"]["error"] == "BadArgument"
    assert "arguments must be an object" in refused["content"][0]["text"]
    assert "this tool takes text" in refused["content"][0]["text"]
    assert missing == {  # no such tool: the tool set says so, whatever the arguments
        "content": [{"type": "text", "text": "no tool nope"}],
        "structuredContent": {"message": "no tool nope"},
        "isError": True,
    }


async def test_an_end_is_told_only_to_the_agent_and_only_once_its_answer_is_written() -> None:
    tools = Echo()
    observing = initialize(1)
    observing["params"]["capabilities"] = {"experimental": {OBSERVER: {}}}
    owed = request(2, "tools/call", {"name": "owed", "arguments": {}})
    with trio.fail_after(GUARD):
        for handshake in (initialize(1), observing):
            async with connected(tools) as peer:
                tools.told = trio.Event()
                await peer.send(handshake, owed)
                await peer.receive()
                assert (await peer.receive())["result"]["content"][0]["text"] == "an end"
                await tools.told.wait()  # the peer is still there
    assert tools.deliveries == [True, False]


@st.composite
def spellings(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    """A request, and one valid JSON spelling of it: any key order, spacing and escaping."""
    arguments = draw(st.dictionaries(st.text(max_size=5), st.text(max_size=10) | st.integers(), max_size=3))
    message = request(
        draw(st.integers() | st.text(max_size=8)), "tools/call", {"name": "echo", "arguments": arguments}
    )
    keys = draw(st.permutations(list(message)))
    text = json.dumps(
        {key: message[key] for key in keys},
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.none() | st.integers(0, 3)),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")])),
    )
    return message, text.replace("\n", " ").encode()


@given(spellings())
def test_a_request_is_read_the_same_however_it_is_spelt(spelt: tuple[dict[str, Any], bytes]) -> None:
    message, line = spelt
    read = read_message(line)
    assert (read.id, read.method, read.params) == (message["id"], message["method"], message["params"])  # type: ignore[union-attr]
