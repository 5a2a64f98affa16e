"""The subagent daemon as a process: sessions outlive it, a crash loses no end, bad input ends nothing."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from fixtures import acp_agent
from tests.helpers.listener import AgentListener
from tests.helpers.processes import wait_exited
from tests.helpers.results import call
from tests.helpers.subagents import World, daemon_pid, mcp_session, stop_daemon, wait_until

TURN = 90


async def tool(world: World, which: str, **arguments: Any) -> dict[str, Any]:
    """One tool call through hive-subagent-mcp (its daemon started on first use), in a session of its own."""
    async with mcp_session(world) as session:
        result = await call(session, which, **arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


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


def acp_behind_a_wrapper(world: World) -> dict[str, str]:
    """``HIVE_ACP_COMMAND`` a shell script that runs the fake ACP agent without ``exec`` (the
    shell is the agent's first process) and notes its own pid and each SIGINT it gets."""
    wrapper = world.root / "acp-wrapper"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo $$ > "{world.root}/wrapper.pid"\n'
        f"trap 'echo SIGINT >> \"{world.root}/wrapper.signals\"' INT\n"
        f'{sys.executable} {acp_agent.PATH} "$@"\n'
        "exit $?\n"
    )
    wrapper.chmod(0o755)
    return {"HIVE_ACP_COMMAND": str(wrapper), "HIVE_ACP_ARGS": "[]"}


async def test_a_sigkilled_daemon_s_acp_agent_behind_a_wrapper_script_gets_sigint_in_every_process(
    world: World,
) -> None:
    """The crash is the point: SIGKILL to the daemon mid-turn. The kernel's parent-death signal
    would reach the wrapper shell alone; the sentinel (``guarding_agents``) sends SIGINT to the
    agent's whole process group, so the agent, which stays after its stdin's end, gets it too."""
    world.acp.script([{"record": "working"}, {"sleep": 600}], on_eof="linger")
    with trio.fail_after(TURN):
        async with mcp_session(world, **acp_behind_a_wrapper(world)) as session:
            started = await call(session, "start", name="w", prompt="work", runtime="acp")
            assert not started.is_error, started.content
        await world.acp.wait_for_event("note")
        (agent,) = world.acp.pids()
        wrapper = int(Path(world.root / "wrapper.pid").read_text())
        pid = daemon_pid(world.state)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_exited(agent)
        await wait_exited(wrapper)
    assert world.acp.signals() == ["SIGINT"]
    assert (world.root / "wrapper.signals").read_text().split() == ["SIGINT"]


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
