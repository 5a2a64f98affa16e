"""hive-agent supervises the daemons it starts (issue 38, 7): a bash daemon that dies is started
again and delivers what it owes, while it is down the status and the agent's calls say so, and the
subagent daemon of ``--subagents`` is the harness's child, stopped with SIGINT when it stops.

Real processes: ``hive-agent`` with a scripted ACP agent, its daemons SIGKILLed (the fault under
test). To hold the bash daemon down for as long as the test looks, the test takes the daemon's
state-dir lock the moment the killed daemon lets it go: the restarts fail (as a daemon that cannot
start does) until it lets go. Every wait is on an event (inotify, pidfd, a lock, a line).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from fixtures import acp_agent
from hive.agent_socket import AgentStatus, open_agent_connection
from tests.helpers.harness import Agent, acp_env, running_agent
from tests.helpers.inotify import wait_until
from tests.helpers.processes import wait_exited

GUARD = 90


pytestmark = pytest.mark.kill_at_end("start")


def started_pid(agent: Agent, what: str) -> int:
    found = re.search(rf"started {what} \(pid (\d+)\)", agent.stderr())
    assert found, agent.stderr()
    return int(found[1])


async def status(agent: Agent) -> AgentStatus:
    async with open_agent_connection(agent.socket) as connection:
        return await connection.status()


def hive_agent_status(agent: Agent) -> str:
    """What ``hive agent status`` prints for the agent."""
    done = subprocess.run(
        [sys.executable, "-m", "hive.cli", "agent", "status", "--state-dir", str(agent.state)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def prompts(root: Path) -> list[str]:
    return [e["text"] for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == "prompt"]


def text_of(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


async def test_a_killed_bash_daemon_is_said_down_then_started_again_and_delivers_the_end_it_owes(
    root: Path,
) -> None:
    outage = root / "state" / "bash-daemon-down"
    with trio.fail_after(GUARD):
        async with running_agent(root, acp_env(root, ["default"]), "--with-bash-daemon") as agent:
            first = started_pid(agent, "hive-bash-daemon")
            relay = StdioServerParameters(
                command=sys.executable,
                args=[
                    "-m",
                    "hive.bash.relay",
                    "--socket",
                    str(agent.state / "bash.sock"),
                    "--outage-file",
                    str(outage),
                ],
                env=dict(os.environ),
            )
            async with stdio_client(relay) as (read, write), ClientSession(read, write) as bash:
                await bash.initialize()
                # A task that ends when the daemon dies: its end is owed by the daemon started next.
                cmd = f"tail --pid={first} -s 0.01 -f /dev/null; echo after-the-daemon"
                started = await bash.call_tool("run", {"cmd": cmd, "name": "job", "wait_seconds": 0})
                assert not started.is_error, text_of(started)
                # A file in the socket's place (the daemon keeps listening on its own): the daemon
                # started after this one cannot start, and is tried again, until it is gone.
                (agent.root / "in-the-way").write_text("")
                os.rename(agent.root / "in-the-way", agent.state / "bash.sock")
                os.kill(first, signal.SIGKILL)
                await wait_until(lambda: "did not start" in agent.stderr(), agent.root)
                await wait_until(outage.exists, agent.state)
                down = await status(agent)
                printed = hive_agent_status(agent)
                call = await bash.call_tool("status", {"id": "job"})
                (agent.state / "bash.sock").unlink()
                await wait_until(lambda: not outage.exists(), agent.state)
                back = await status(agent)
                await agent.hive_line(lambda r: any(c["from"] == "bash-task-job" for c in r["carried"]))
                listed = await bash.call_tool("list", {})
    assert agent.process.returncode == 0, agent.stderr()
    assert down.bash_daemon is not None and down.bash_daemon.state == "down"
    assert down.bash_daemon.pid is None and down.bash_daemon.restart_at is not None
    assert "bash daemon: DOWN since" in printed and "hive-agent starts it again" in printed, printed
    assert call.is_error
    assert text_of(call).startswith("the bash daemon of this agent is down since "), text_of(call)
    assert "hive-agent is restarting it" in text_of(call) and "Start it with" not in text_of(call)
    assert back.bash_daemon is not None and back.bash_daemon.state == "running"
    assert back.bash_daemon.pid not in (None, first) and back.bash_daemon.restarts >= 1
    assert back.bash_daemon.last_exit is not None and "did not start" in back.bash_daemon.last_exit
    assert "hive-bash-daemon killed by SIGKILL; starting it again in 0.5 s" in agent.stderr()
    # The end the first daemon owed reached the agent once, through the daemon started after it.
    job = [p for p in prompts(root) if p.startswith("[wake from bash-task-job]")]
    assert len(job) == 1 and "after-the-daemon" in job[0], prompts(root)
    assert not listed.is_error  # the same relay reaches the daemon that is back
    assert not outage.exists()
    recorded = json.loads((agent.state / "bash-daemon-pid.json").read_text())
    assert [r["pid"] for r in recorded] == [back.bash_daemon.pid]
    await wait_exited(back.bash_daemon.pid)  # it got the harness's SIGINT


async def test_the_subagent_daemon_is_the_harness_s_supervised_child_and_gets_sigint_when_it_stops(
    root: Path,
) -> None:
    record = root / "state" / "subagent-daemon-pid.json"
    with trio.fail_after(GUARD):
        async with running_agent(root, acp_env(root, ["default"]), "--subagents") as agent:
            first = started_pid(agent, "the subagent daemon")
            assert (await status(agent)).subagent_daemon.pid == first  # type: ignore[union-attr]
            os.kill(first, signal.SIGKILL)
            again = await wait_until(
                lambda: re.search(r"started subagent daemon again \(pid (\d+)\)", agent.stderr()), agent.root
            )
            second = int(again[1])
            await wait_until(lambda: str(second) in record.read_text(), agent.state)
            back = await status(agent)
            pidfd = os.pidfd_open(second)
        try:
            # The block's end sent hive-agent SIGINT and waited for it: its daemon went first.
            assert agent.process.returncode == 0, agent.stderr()
            assert select.select([pidfd], [], [], 0)[0] == [pidfd]  # it has exited
        finally:
            os.close(pidfd)
    assert back.subagent_daemon is not None and back.subagent_daemon.state == "running"
    assert back.subagent_daemon.last_exit == "killed by SIGKILL" and back.subagent_daemon.restarts == 1
    stderr = agent.stderr()
    assert "hive-subagent-daemon: INFO: SIGINT: stopping" in stderr, stderr
    assert "Traceback" not in stderr
    assert not (agent.state / "subagent.sock").exists()


async def test_the_subagent_server_of_a_harness_starts_no_daemon_and_says_the_outage(tmp_path: Path) -> None:
    state, outage = tmp_path / "state", tmp_path / "state" / "subagent-daemon-down"
    state.mkdir()
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hive.subagent.relay", "--state-dir", str(state), "--outage-file", str(outage)],
        env=dict(os.environ),
    )
    with trio.fail_after(GUARD):
        async with stdio_client(server) as (read, write), ClientSession(read, write) as subagents:
            await subagents.initialize()
            unreachable = await subagents.call_tool("status", {})
            outage.write_text(
                "the subagent daemon of this agent is down since 10:00:00 (killed by SIGKILL)\n"
            )
            down = await subagents.call_tool("status", {})
    assert unreachable.is_error and "cannot reach the subagent daemon" in text_of(unreachable)
    assert not (state / "subagent.sock").exists() and not (state / "subagent-daemon.log").exists()
    assert down.is_error and text_of(down) == outage.read_text().strip()
