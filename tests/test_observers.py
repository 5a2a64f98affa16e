"""Only the agent settles its own ends (issue 38, defect 1).

An end counts as told to the agent only when the agent socket acknowledged its wake, or when it
was answered inline to a call of the agent itself. An observer (``hive bash``, ``hive web``, any
MCP client that declares ``hive/observer`` at ``initialize``) may watch, wait on and stop the
agent's task, and the agent is still woken for its end: each test has the agent start a task and
an observer see (or cause) its end, and then waits for the agent's wake, which on a daemon that
let the observer settle the end never comes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from hive.agent_socket import LineReader
from hive.bash import open_bash_client
from tests.helpers.daemon import DaemonHandle, shared_daemon, tail_follow_argv
from tests.helpers.gates import make_gate, release_gate
from tests.helpers.jsonrpc import answer, notification, request, run_request, send
from tests.helpers.listener import AgentListener

WITHIN = 30  # a guard only: how long one test's daemon and CLI calls may take in all


@pytest.fixture(scope="module")
def watched() -> Iterator[DaemonHandle]:
    """One daemon with an agent socket for the module: each test serves that socket while it runs,
    uses task names of its own and waits for every wake its tasks owe."""
    with shared_daemon(agent=True) as handle:
        yield handle


@asynccontextmanager
async def session(
    daemon: DaemonHandle, capabilities: dict[str, Any]
) -> AsyncIterator[tuple[trio.SocketStream, LineReader]]:
    """A raw MCP session on the daemon's socket whose client declares ``capabilities``."""
    stream = await trio.open_unix_socket(str(daemon.socket))
    async with stream:
        reader = LineReader(stream)
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "a test", "version": "0"},
        }
        await send(stream, request(1, "initialize", hello))
        await answer(reader, 1)
        await send(stream, notification("notifications/initialized"))
        yield stream, reader


async def agent_starts(daemon: DaemonHandle, name: str, cmd: str) -> None:
    """The agent (a client that says nothing of itself) starts ``cmd`` as ``name``, answered at once."""
    async with session(daemon, {}) as (stream, reader):
        await send(stream, run_request(2, cmd=cmd, name=name, wait_seconds=0))
        started = (await answer(reader, 2))["structuredContent"]
    # What the agent reads (its answer without full) promises the wake.
    assert f"woken by a message from bash-task-{name}" in started["message"], started


async def the_agent_is_woken(agent: AgentListener, name: str) -> str:
    """Wait for the wake of ``name``'s end; its body."""
    while True:
        for wake in agent.wakes:
            if wake.sender == f"bash-task-{name}":
                return wake.body
        await agent.wait_for(len(agent.wakes) + 1)


async def hive(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *args], capture_stdout=True, capture_stderr=True, check=False
    )


async def test_a_client_that_declares_itself_an_observer_waits_on_an_end_and_the_agent_is_still_woken(
    watched: DaemonHandle,
) -> None:
    agent = AgentListener(watched.agent_socket)
    gate = make_gate(watched.root, "gate-observed")
    with trio.fail_after(WITHIN):
        async with agent.serving():
            await agent_starts(watched, "observed", f"read line < {gate}; exit 7")
            async with session(watched, {"experimental": {"hive/observer": {}}}) as (stream, reader):
                waiting = request(
                    2, "tools/call", {"name": "status", "arguments": {"id": "observed", "wait_seconds": 25}}
                )
                listing = request(3, "tools/call", {"name": "list", "arguments": {}})
                await send(stream, waiting, listing)
                # The list is answered while the status waits: the observer's wait is in.
                assert (await answer(reader, 3))["structuredContent"]["total"] >= 1
                await release_gate(gate)
                ended = (await answer(reader, 2))["structuredContent"]
            assert (ended["state"], ended["exit_code"]) == ("done", 7)
            assert "exit code 7" in await the_agent_is_woken(agent, "observed")


async def test_hive_bash_stop_and_hive_webs_client_stop_the_agents_task_and_the_agent_is_still_woken(
    watched: DaemonHandle,
) -> None:
    agent = AgentListener(watched.agent_socket)
    with trio.fail_after(WITHIN):
        async with agent.serving():
            await agent_starts(watched, "stopped-cli", "sleep 600")
            await agent_starts(watched, "stopped-web", "sleep 600")
            stopped = await hive("bash", "stop", "stopped-cli", "--socket", str(watched.socket), "--json")
            assert stopped.returncode == 0, stopped.stderr.decode()
            assert json.loads(stopped.stdout)["state"] == "stopped"
            # `hive web`'s stop button calls the daemon through this client.
            async with open_bash_client(watched.socket) as client:
                by_web = await client.stop("stopped-web")
            assert by_web.structured["state"] == "stopped"
            for name in ("stopped-cli", "stopped-web"):
                assert "stopped" in await the_agent_is_woken(agent, name)


async def test_hive_bash_tail_follow_to_the_end_leaves_the_agents_wake_owed(watched: DaemonHandle) -> None:
    agent = AgentListener(watched.agent_socket)
    gate = make_gate(watched.root, "gate-tailed")
    with trio.fail_after(WITHIN):
        async with agent.serving():
            await agent_starts(watched, "tailed", f"echo first; read line < {gate}; echo last; exit 3")
            argv = tail_follow_argv("tailed", "--socket", str(watched.socket))
            async with trio.open_nursery() as nursery:
                tail: trio.Process = await nursery.start(
                    partial(trio.run_process, argv, stdout=subprocess.PIPE, check=False)
                )
                assert tail.stdout is not None
                seen = b""
                while b"first\n" not in seen:
                    chunk = await tail.stdout.receive_some()
                    assert chunk, f"tail -f ended before the task's first line: {seen!r}"
                    seen += chunk
                await release_gate(gate)
                async for chunk in tail.stdout:
                    seen += chunk
            assert tail.returncode == 3
            assert seen == b"first\nlast\n"
            assert "exit code 3" in await the_agent_is_woken(agent, "tailed")


async def test_a_task_an_observer_runs_and_sees_end_inline_still_wakes_the_agent(
    watched: DaemonHandle,
) -> None:
    agent = AgentListener(watched.agent_socket)
    with trio.fail_after(WITHIN):
        async with agent.serving():
            async with open_bash_client(watched.socket) as client:
                ran = await client.run("exit 4", name="operators", wait_seconds=20)
            assert (ran.structured["state"], ran.structured["exit_code"]) == ("done", 4)
            assert "exit code 4" in await the_agent_is_woken(agent, "operators")
