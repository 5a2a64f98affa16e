"""Scripted stand-ins for the bash daemon's socket, for what a real daemon never answers.

Each script plays one connection: typically the MCP handshake, then one ``tools/call``,
then whatever answer (or none) the test is about.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from hive._unix import open_unix_listener
from hive.agent_socket import LineReader


class Conversation:
    """One client connection, as the fake daemon sees it: JSON-RPC messages a line."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._reader = LineReader(stream, limit=1 << 24)

    async def receive(self) -> dict[str, Any]:
        line = await self._reader.readline()
        assert line is not None, "the client hung up"
        message: dict[str, Any] = json.loads(line)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def handshake(self) -> None:
        init = await self.receive()
        assert init["method"] == "initialize"
        assert init["params"]["clientInfo"]["name"] == "hive"
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": init["id"],
                "result": {
                    "protocolVersion": init["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-bash", "version": "0"},
                },
            }
        )
        assert (await self.receive())["method"] == "notifications/initialized"

    async def next_call(self) -> dict[str, Any]:
        """The handshake, then the ``tools/call`` request that follows it."""
        await self.handshake()
        request = await self.receive()
        assert request["method"] == "tools/call"
        return request

    async def answer(self, request: dict[str, Any], text: str, structured: dict[str, Any]) -> None:
        result = {"content": [{"type": "text", "text": text}], "structuredContent": structured}
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


Script = Callable[[Conversation], Awaitable[None]]


@asynccontextmanager
async def fake_daemon(path: Path, script: Script) -> AsyncIterator[None]:
    """Serve ``script`` on every connection to ``path`` for the duration of the block."""

    async def play(stream: trio.SocketStream) -> None:
        async with stream:
            await script(Conversation(stream))

    async with open_unix_listener(path) as listener, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, play, [listener])
        yield
        nursery.cancel_scope.cancel()


# -- what a real daemon never does ----------------------------------------------------------------


async def closes_at_once(conversation: Conversation) -> None:
    """Accepts, then hangs up before the handshake."""


async def answers_garbage(conversation: Conversation) -> None:
    await conversation.next_call()
    await conversation.send_raw(b"this is not json\n")


async def answers_a_jsonrpc_error(conversation: Conversation) -> None:
    request = await conversation.next_call()
    error = {"code": -32603, "message": "it broke\nover two lines"}
    await conversation.send({"jsonrpc": "2.0", "id": request["id"], "error": error})


async def answers_the_wrong_shape(conversation: Conversation) -> None:
    request = await conversation.next_call()
    await conversation.send({"jsonrpc": "2.0", "id": request["id"], "result": {"content": "not a list"}})


async def hangs_up_mid_answer(conversation: Conversation) -> None:
    request = await conversation.next_call()
    await conversation.send_raw(b'{"jsonrpc": "2.0", "id": ' + str(request["id"]).encode() + b', "res')


BAD_ANSWERS: dict[str, tuple[Script, str]] = {
    # script, and what the client's one line says
    "closes-at-once": (closes_at_once, "closed the connection before answering"),
    "garbage": (answers_garbage, "not JSON"),
    "jsonrpc-error": (answers_a_jsonrpc_error, "answered with an error: it broke over two lines"),
    "wrong-shape": (answers_the_wrong_shape, "tool result of the wrong shape"),
    "hangs-up-mid-answer": (hangs_up_mid_answer, "closed the connection before answering"),
}


@asynccontextmanager
async def bad_daemon(directory: Path, case: str) -> AsyncIterator[Path]:
    """A fake daemon on a socket in ``directory`` that answers as ``BAD_ANSWERS[case]`` says."""
    path = directory / "fake.sock"
    async with fake_daemon(path, BAD_ANSWERS[case][0]):
        yield path
