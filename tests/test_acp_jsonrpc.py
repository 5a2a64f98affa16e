"""The ACP JSON-RPC connection over in-memory streams: framing, order, errors, the end."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.acp import AgentExited, Connection, JsonRpcError
from hive.acp._jsonrpc import Unhandled
from tests.helpers.strategies import acp_notifications, blank_lines, over_long_lines


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


async def connect(nursery: trio.Nursery, **options: Any) -> tuple[Connection, Peer, Client]:
    ours, theirs = trio.testing.memory_stream_pair()
    client = Client()
    connection = Connection(ours, ours, client.on_request, client.on_notification, client.on_end, **options)
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


@settings(max_examples=100)
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


SMALL_LINE = 1024
"""A small ``max_line``, so over-long lines are cheap to make."""


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


async def send_chunks(peer: Peer, chunks: list[bytes]) -> None:
    """Each chunk reaches the reader in a read of its own: it is taken before the next is sent."""
    for chunk in chunks:
        await peer.stream.send_all(chunk)
        await trio.testing.wait_all_tasks_blocked()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]


# A message that would be applied if it were not longer than SMALL_LINE.
GIANT = line({"jsonrpc": "2.0", "method": "giant", "params": {"text": "x" * (3 * SMALL_LINE)}})[:-1]
CUT = SMALL_LINE + 1  # the first chunk alone is over-long


@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda rest: [GIANT[:CUT], GIANT[CUT:] + b"\n" + rest], id="newline-in-next-chunk"),
        pytest.param(
            lambda rest: [GIANT[:CUT], GIANT[CUT : 2 * CUT], GIANT[2 * CUT :] + b"\n" + rest],
            id="spans-several-chunks",
        ),
        pytest.param(lambda rest: [GIANT[:CUT], GIANT[CUT:] + b"\n", rest], id="newline-ends-a-chunk"),
        pytest.param(lambda rest: [GIANT, b"\n" + rest], id="newline-starts-a-chunk"),
    ],
)
async def test_messages_after_an_over_long_line_are_kept(
    cut: Callable[[bytes], list[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    async with trio.open_nursery() as nursery:
        connection, peer, client = await connect(nursery, max_line=SMALL_LINE)
        pending = await connection.start_request("ping", {})
        request = await peer.read()
        after = {"jsonrpc": "2.0", "method": "after", "params": {}}
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": "pong"}
        await send_chunks(peer, cut(line(after) + line(answer)))
        with trio.fail_after(5):
            assert await pending.wait() == "pong"
        assert client.notifications == [("after", {})]
        assert errors(caplog) == [f"the agent sent a message longer than {SMALL_LINE} bytes; dropping it"]
        nursery.cancel_scope.cancel()


async def test_a_line_torn_by_the_end_is_logged_and_a_giant_there_only_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with trio.open_nursery() as nursery:
        _, peer, _ = await connect(nursery, max_line=SMALL_LINE)
        await send_chunks(peer, [b'{"jsonrpc": "2.0", "method": "torn"'])
        await peer.stream.aclose()
    assert "ended in the middle of a message" in caplog.text
    caplog.clear()
    async with trio.open_nursery() as nursery:
        _, peer, _ = await connect(nursery, max_line=SMALL_LINE)
        await send_chunks(peer, [GIANT[:CUT], GIANT[CUT:]])
        await peer.stream.aclose()
    assert len(errors(caplog)) == 1
    assert "ended in the middle of a message" not in caplog.text


async def test_a_long_line_in_many_small_chunks_is_delivered() -> None:
    # Framing searches each byte once: before, this rescanned the whole line for every chunk.
    async with trio.open_nursery() as nursery:
        _, peer, client = await connect(nursery)
        data = line({"jsonrpc": "2.0", "method": "long", "params": {"text": "x" * (8 * 1024 * 1024)}})
        size = 64 * 1024
        await send_chunks(peer, [data[i : i + size] for i in range(0, len(data), size)])
        assert [(method, len(params["text"])) for method, params in client.notifications] == [
            ("long", 8 * 1024 * 1024)
        ]
        nursery.cancel_scope.cancel()


@settings(max_examples=50)
@given(
    st.lists(st.one_of(acp_notifications, over_long_lines(SMALL_LINE), blank_lines), max_size=12), st.data()
)
def test_valid_messages_survive_over_long_lines_at_any_chunk_boundaries(
    items: list[dict[str, Any] | bytes], data: st.DataObject
) -> None:
    expected = [(item["method"], item["params"]) for item in items if isinstance(item, dict)]
    answer = {"jsonrpc": "2.0", "id": 1, "result": "pong"}
    stream = b"".join(item if isinstance(item, bytes) else line(item) for item in items) + line(answer)
    # Chunks about as long as max_line often end inside an over-long line, past max_line.
    chunks: list[bytes] = []
    start = 0
    while start < len(stream):
        end = start + data.draw(st.integers(1, 2 * SMALL_LINE))
        chunks.append(stream[start:end])
        start = end

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            connection, peer, client = await connect(nursery, max_line=SMALL_LINE)
            pending = await connection.start_request("ping", {})
            assert pending.id == answer["id"]
            await send_chunks(peer, chunks)
            # The end settles the request if its answer was lost, so a failure cannot hang.
            await peer.stream.aclose()
        assert client.notifications == expected
        assert await pending.wait() == "pong"

    trio.run(main)
