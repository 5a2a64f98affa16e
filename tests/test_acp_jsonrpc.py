"""The ACP JSON-RPC connection over in-memory streams: framing, order, errors, the end."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.acp import AgentExited, Connection, JsonRpcError
from hive.acp._jsonrpc import Unhandled


class Peer:
    """The agent's end of the pipe, as raw lines."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def write(self, *messages: Any) -> None:
        await self.stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def read(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.stream.receive_some(65536)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        result: dict[str, Any] = json.loads(line)
        return result


class Client:
    def __init__(self) -> None:
        self.notifications: list[tuple[str, Any]] = []
        self.requests: list[tuple[str, Any]] = []

    async def on_request(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "ok"}}
        raise Unhandled(method)

    async def on_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))

    async def on_end(self) -> BaseException:
        return AgentExited(3, "boom on stderr\n")


async def connect(nursery: trio.Nursery) -> tuple[Connection, Peer, Client]:
    ours, theirs = trio.testing.memory_stream_pair()
    client = Client()
    connection = Connection(ours, ours, client.on_request, client.on_notification, client.on_end)
    await nursery.start(connection.serve)
    return connection, Peer(theirs), client


async def test_updates_before_an_answer_are_applied_before_its_waiter_wakes() -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, client = await connect(nursery)
        pending = await connection.start_request("session/prompt", {"sessionId": "s"})
        request = await peer.read()
        assert (request["method"], request["id"]) == ("session/prompt", pending.id)
        updates = [{"jsonrpc": "2.0", "method": "session/update", "params": {"n": i}} for i in range(500)]
        await peer.write(
            *updates, {"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}}
        )
        assert await pending.wait() == {"stopReason": "end_turn"}
        assert [params["n"] for _, params in client.notifications] == list(range(500))
        nursery.cancel_scope.cancel()


async def test_framing_big_dribbled_and_bad_lines() -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, client = await connect(nursery)
        big = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "x" * (8 * 1024 * 1024)}}
        await peer.write(big)
        for byte in json.dumps({"jsonrpc": "2.0", "method": "dribbled", "params": {}}).encode() + b"\n":
            await peer.stream.send_all(bytes([byte]))
        await peer.stream.send_all(b"this is not json\n[1,2]\n\n")
        pending = await connection.start_request("ping", {})
        request = await peer.read()
        await peer.write({"jsonrpc": "2.0", "id": request["id"], "result": None})
        assert await pending.wait() is None
        assert [method for method, _ in client.notifications] == ["session/update", "dribbled"]
        assert len(client.notifications[0][1]["text"]) == 8 * 1024 * 1024
        nursery.cancel_scope.cancel()


async def test_requests_it_does_not_serve_get_32601_with_their_own_id() -> None:
    async with trio.open_nursery() as nursery:
        _, peer, client = await connect(nursery)
        await peer.write(
            {"jsonrpc": "2.0", "id": 5, "method": "terminal/create", "params": {}},
            {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {}},
            {"jsonrpc": "2.0", "id": 7, "method": "_acme/ping"},
            {"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission", "params": {}},
        )
        answers = {(a := await peer.read())["id"]: a for _ in range(4)}
        for request_id in (5, "e1", 7):
            assert answers[request_id]["error"]["code"] == -32601
        assert answers["perm-1"]["result"]["outcome"]["optionId"] == "ok"
        # Each request is answered in a task of its own, so in no particular order.
        assert sorted(m for m, _ in client.requests) == [
            "_acme/ping",
            "elicitation/create",
            "session/request_permission",
            "terminal/create",
        ]
        nursery.cancel_scope.cancel()


async def test_the_end_of_output_fails_every_waiter_at_once_and_later_calls_fast() -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, _ = await connect(nursery)
        first = await connection.start_request("session/prompt", {})
        second = await connection.start_request("session/load", {})
        await peer.stream.aclose()
        with trio.fail_after(5):
            for pending in (first, second):
                with pytest.raises(AgentExited, match=r"exited with status 3.*boom on stderr"):
                    await pending.wait()
        with pytest.raises(AgentExited):
            await connection.request("initialize", {})


async def test_an_error_answer_is_raised_with_its_code() -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, _ = await connect(nursery)
        pending = await connection.start_request("session/new", {})
        request = await peer.read()
        await peer.write(
            {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "auth"}}
        )
        with pytest.raises(JsonRpcError, match="auth") as caught:
            await pending.wait()
        assert caught.value.code == -32000
        nursery.cancel_scope.cancel()


async def test_waiting_can_be_cancelled_and_resumed_without_losing_the_answer() -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, _ = await connect(nursery)
        pending = await connection.start_request("session/prompt", {})
        with trio.move_on_after(0.01):
            await pending.wait()
        request = await peer.read()
        await peer.write({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "cancelled"}})
        assert await pending.wait() == {"stopReason": "cancelled"}
        nursery.cancel_scope.cancel()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_random_bytes_never_break_the_connection(chunks: list[bytes]) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            connection, peer, _ = await connect(nursery)
            for chunk in chunks:
                await peer.stream.send_all(chunk.replace(b"\n", b" ") + b"\n")
            pending = await connection.start_request("ping", {})
            while (request := await peer.read()).get("method") != "ping":
                pass
            await peer.write({"jsonrpc": "2.0", "id": request["id"], "result": "pong"})
            assert await pending.wait() == "pong"
            nursery.cancel_scope.cancel()

    trio.run(main)
