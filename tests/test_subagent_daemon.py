"""The subagent daemon as a process: sessions outlive it, a crash loses no end, bad input ends nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.subagent import _client
from hive.subagent._wire import Answer, Call, Caller, decode_answer, decode_call, encode
from tests.helpers.listener import AgentListener
from tests.helpers.processes import wait_exited
from tests.helpers.servers import subagent_daemon_process
from tests.helpers.strategies import subagent_lines
from tests.helpers.subagents import World, daemon_pid, stop_daemon, wait_until

TURN = 90


async def tool(world: World, which: str, **arguments: Any) -> dict[str, Any]:
    """One tool call through the daemon (started on first use), as hive-subagent-mcp makes it."""
    state = world.state
    answer = await _client.call(state, state / "subagent.sock", Call(which, arguments, world.caller()))
    assert not answer.is_error, answer.text
    return answer.structured


async def test_a_session_is_continued_after_the_daemon_restarts(world: World) -> None:
    world.claude.script("default", "default", sessions=True)
    with trio.fail_after(TURN):
        await tool(world, "start", name="s", prompt="remember 7")
        (first,) = (await tool(world, "status", name="s", wait_seconds=30))["subagents"]
        first_pid = daemon_pid(world.state)
        await stop_daemon(world.state)
        await tool(world, "continue", name="s", prompt="what was it?")  # starts a daemon again
        assert daemon_pid(world.state) != first_pid
        (second,) = (await tool(world, "status", name="s", wait_seconds=30))["subagents"]
    assert first["session_id"] is not None and second["session_id"] == first["session_id"]
    assert (second["turns"], second["last_turn"]["stop_reason"]) == (2, "completed")
    starts = world.claude.starts()
    assert starts[1]["options"].get("resume") == first["session_id"]
    assert [line["type"] for line in world.log("s")].count("result") == 2


async def test_a_daemon_killed_mid_turn_loses_no_end_and_leaves_no_second_claude(world: World) -> None:
    """The crash is the point here: SIGKILL to the daemon while its claude is mid-tool. The next
    daemon finds the turn lost, tells the caller, and holds the name until that claude has
    exited. Its SIGINT is the kernel's, sent as its daemon died (once more for each of the dying
    daemon's threads it is handed to on the way: this claude ignores those); the next daemon
    sends none."""
    world.claude.script(
        [
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 100"}}},
            {"wait_for_signal": "SIGINT"},
            {"record": "stopping"},
            {"wait_for_signal": "SIGUSR1"},
            {"exit": 130},
        ],
        "default",
        on_signal={"SIGINT": "ignore"},
    )
    agent = AgentListener(world.agent_socket)
    with trio.fail_after(TURN):
        async with agent.serving():
            await tool(world, "start", name="k", prompt="run the tool")
            await wait_until(world, lambda: any("tool_use" in str(line) for line in world.log("k")))
            pid = daemon_pid(world.state)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            await wait_exited(pid)
            (claude,) = [start["pid"] for start in world.claude.starts()]
            (status,) = (await tool(world, "status", name="k"))["subagents"]  # a new daemon
            await wait_until(world, lambda: world.claude.events("note"))
            assert status["slot"] == "stopping" and status["last_turn"]["stop_reason"] == "lost"
            (wake,) = await agent.wait_for(1)
            os.kill(claude, signal.SIGUSR1)
            await wait_exited(claude)
            waited = await tool(world, "status", name="k", wait_seconds=30)
            while waited["subagents"][0]["slot"] is not None:
                waited = await tool(world, "status", name="k", wait_seconds=30)
            await tool(world, "continue", name="k", prompt="again")
            (after,) = (await tool(world, "status", name="k", wait_seconds=30))["subagents"]
    signals = [(e["pid"], e["signal"]) for e in world.claude.events("signal")]
    *interrupts, last = [sent for pid, sent in signals if pid == claude]
    assert interrupts and set(interrupts) == {"SIGINT"} and last == "SIGUSR1"
    assert wake.sender == "subagent-k" and "(lost, an error)" in wake.body
    assert (after["turns"], after["last_turn"]["stop_reason"]) == (2, "completed")


async def test_an_end_untold_at_a_clean_stop_is_told_after_the_restart(world: World) -> None:
    world.claude.script([{"init": {}}, {"wait_for_signal": "SIGINT"}, {"interrupted": "stream"}])
    with trio.fail_after(TURN):
        await tool(world, "start", name="u", prompt="think")
        await wait_until(world, lambda: world.claude.events("start"))
        await stop_daemon(world.state)  # the turn's stop path: SIGINT, its own end; nobody to tell
        agent = AgentListener(world.agent_socket)
        async with agent.serving():
            (status,) = (await tool(world, "status", name="u"))["subagents"]
            (wake,) = await agent.wait_for(1)
    assert world.claude.signals() == ["SIGINT"]
    assert status["last_turn"]["stop_reason"] == "daemon_stopped"
    assert wake.sender == "subagent-u" and "daemon_stopped" in wake.body


async def test_servers_starting_a_daemon_at_once_share_one(world: World) -> None:
    answers: list[dict[str, Any]] = []

    async def ask() -> None:
        answers.append(await tool(world, "status"))

    with trio.fail_after(TURN):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(ask)
    assert [a["subagents"] for a in answers] == [[]] * 4
    assert daemon_pid(world.state) is not None
    log = (world.state / "subagent-daemon.log").read_text()
    assert log.count("listening on") == 1, log


# -- bad input on the socket ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def daemon_socket() -> Iterator[str]:
    """One daemon for all the examples, started synchronously (outside any Trio run)."""
    with subagent_daemon_process() as path:
        yield str(path)


def status_call() -> bytes:
    return encode(Call("status", {}, Caller(cwd="/")))


def exchange(sock: socket.socket, data: bytes) -> Answer:
    sock.sendall(data)
    buffer = b""
    while b"\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, "the daemon closed the connection"
        buffer += chunk
    return decode_answer(buffer.split(b"\n", 1)[0])


@settings(max_examples=80, deadline=None)
@given(line=subagent_lines)
def test_a_bad_line_gets_an_error_and_the_connection_goes_on(daemon_socket: str, line: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(daemon_socket)
        answer = exchange(sock, line + b"\n")
        assert answer.structured["message"]
        try:
            well_formed = isinstance(json.loads(line), dict) and "caller" in json.loads(line)
        except ValueError:
            well_formed = False
        assert answer.is_error or well_formed, answer
        assert not exchange(sock, status_call()).is_error


@given(
    call=st.builds(
        Call,
        st.text(max_size=20),
        st.dictionaries(st.text(max_size=10), st.text(max_size=10) | st.integers() | st.none()),
        st.builds(
            Caller,
            st.text(max_size=30),
            st.dictionaries(st.text(max_size=10), st.text(max_size=20)),
            st.none() | st.text(max_size=20),
        ),
    )
)
def test_a_call_round_trips(call: Call) -> None:
    assert decode_call(encode(call).rstrip(b"\n")) == call
