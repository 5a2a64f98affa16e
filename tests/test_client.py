"""hive.bash.client: the daemon's tools without the MCP SDK, blocking and over Trio."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from hive.bash import BashError, DaemonUnavailable
from hive.bash.client import BadAnswer, CallResult, _Session, connect, open_bash_client
from tests.helpers.daemon import DaemonHandle
from tests.helpers.fake_bash_daemon import BAD_ANSWERS, Conversation, bad_daemon, fake_daemon

WITHIN = 30


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def blocking_call(path: Path, tool: str, arguments: dict[str, object]) -> CallResult:
    with connect(path) as client:
        return client.call(tool, arguments)


async def test_the_trio_client_calls_the_daemons_tools(served: DaemonHandle) -> None:
    with trio.fail_after(WITHIN):
        async with open_bash_client(served.socket) as client:
            before = [t["id"] for t in (await client.list()).structured["tasks"]]  # the module's others
            done = await client.run("echo hi", name="hi", wait_seconds=10)
            assert not done.is_error
            assert done.structured["state"] == "done"
            assert done.structured["stdout"]["tail"] == "hi\n"
            assert done.text.startswith("task hi: done, exit code 0")
            status = await client.status("hi")
            assert status.structured["id"] == "hi"
            listed = await client.list()
            assert [t["id"] for t in listed.structured["tasks"]] == ["hi", *before]
            unknown = await client.stop("no-such-task")
            assert unknown.is_error
            assert "no task has id 'no-such-task'" in unknown.text
            assert unknown.structured["error"] == "UnknownTask"


async def test_the_blocking_client_calls_the_daemons_tools(served: DaemonHandle) -> None:
    with trio.fail_after(WITHIN):
        done = await trio.to_thread.run_sync(
            blocking_call, served.socket, "run", {"cmd": "echo hi", "wait_seconds": 10}
        )
    assert not done.is_error
    assert done.structured["stdout"]["tail"] == "hi\n"


async def test_no_daemon_is_daemon_unavailable_naming_the_socket(short_tmp: Path) -> None:
    absent = short_tmp / "absent.sock"
    with pytest.raises(DaemonUnavailable, match=f"cannot reach hive-bash-daemon at {absent}"):
        async with open_bash_client(absent):
            pytest.fail("connected to no daemon")
    with pytest.raises(DaemonUnavailable, match=f"cannot reach hive-bash-daemon at {absent}"):
        blocking_call(absent, "list", {})


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_a_bad_answer_is_a_bash_error_saying_what_was_wrong(short_tmp: Path, case: str) -> None:
    says = BAD_ANSWERS[case][1]
    with trio.fail_after(WITHIN):
        async with bad_daemon(short_tmp, case) as path:
            with pytest.raises(BashError) as over_trio:
                async with open_bash_client(path) as client:
                    await client.call("list")
            with pytest.raises(BashError) as blocking:
                await trio.to_thread.run_sync(blocking_call, path, "list", {})
    for caught in (over_trio, blocking):
        assert says in one_line(caught.value)
        assert str(path) in str(caught.value)
        assert isinstance(caught.value, DaemonUnavailable | BadAnswer)
    if case == "jsonrpc-error":  # a JSON-RPC error keeps its code
        assert isinstance(over_trio.value, BadAnswer)
        assert over_trio.value.code == -32603


async def test_a_ping_and_notifications_from_the_daemon_are_handled_on_the_way(short_tmp: Path) -> None:
    path = short_tmp / "fake.sock"
    pongs: list[dict[str, object]] = []

    async def pings_first(conversation: Conversation) -> None:
        request = await conversation.next_call()
        await conversation.send({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
        await conversation.send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        pongs.append(await conversation.receive())
        await conversation.send({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
        pongs.append(await conversation.receive())
        # An answer to a request the client never made, then (in the same write) the real one.
        await conversation.send_raw(b'{"jsonrpc": "2.0", "id": 999, "result": {}}\n')
        await conversation.answer(request, "fine", {"tasks": []})

    with trio.fail_after(WITHIN):
        async with fake_daemon(path, pings_first):
            async with open_bash_client(path) as client:
                answer = await client.call("list")
            assert answer == CallResult("fine", {"tasks": []}, False)
            blocking = await trio.to_thread.run_sync(blocking_call, path, "list", {})
            assert blocking == answer
    assert pongs[0] == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert pongs[1]["id"] == "r1"
    assert pongs[1]["error"]["code"] == -32601  # type: ignore[index]


def test_an_over_long_line_from_the_daemon_fails_its_call_and_the_session_reads_on() -> None:
    """In-process: the session's lines, with a small limit (the real one is 256 MiB)."""
    session = _Session("/run/fake.sock", limit=64)
    request_id, _ = session.request("tools/call", {"name": "list", "arguments": {}})
    session.feed(b'{"jsonrpc": "2.0", "id": 0, "result": {"x": "' + b"y" * 100)
    with pytest.raises(BadAnswer, match=r"the daemon at /run/fake\.sock sent a line longer than 64 bytes"):
        session.next_line()
    session.feed(b"y" * 1000)  # the rest of the giant: dropped as it comes
    assert session.next_line() is None
    next_id, _ = session.request("tools/call", {"name": "list", "arguments": {}})
    session.feed(b'"}}\n{"jsonrpc":"2.0","id":' + str(next_id).encode() + b',"result":{}}\n')
    line = session.next_line()
    assert line is not None
    assert session.take(line, next_id) == ({}, None)
    assert request_id != next_id
