"""An end answered inline to an agent that dies before it reads it is not lost (issue 38, defect 1).

Real processes: ``hive-agent --with-bash-daemon`` on the scripted ACP agent, whose turn calls
`run` with a wait through the bash relay, gets the task's end inline, and then never ends its
turn. The harness is SIGKILLed once the daemon has settled that end: the turn never delivered,
so the restarted harness's next turns carry the end as a wake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from fixtures import acp_agent
from hive.agent_socket import Prompt, open_agent_connection
from tests.helpers.harness import GUARD, acp_env, running_agent, wait_gone, wait_line
from tests.helpers.processes import wait_exited

RUN = {"cmd": "sleep 0.2", "name": "shown", "wait_seconds": 30}
CALLS_RUN_AND_HANGS = [
    {"claude_tool": {"name": "mcp__bash__run", "input": RUN, "call": {"server": "bash", "tool": "run"}}},
    {"sleep": 600},
]


async def _prompt(socket: Path, text: str) -> None:
    async with open_agent_connection(socket) as conn:
        assert (await conn.request(Prompt(text))).ok


def _carried(lines: list[dict[str, Any]]) -> list[str]:
    return [c["from"] for line in lines for c in line["carried"]]


async def test_an_end_answered_inline_in_a_turn_that_never_delivered_is_carried_after_a_restart(
    root: Path,
) -> None:
    env = acp_env(root, [CALLS_RUN_AND_HANGS, "default"])
    record = root / "acp-record.jsonl"
    with trio.fail_after(GUARD):
        async with running_agent(root, env, "--with-bash-daemon") as agent:
            await _prompt(agent.socket, "go")
            answered = await wait_line(record, lambda e: e["event"] == "mcp_call")
            # The daemon has settled the end (a wake acknowledged, or, before, the answer written).
            await wait_gone(agent.state / "mcp-loose-ends" / "bash-task-shown.json")
            agent.process.kill()  # the fault: the agent's turn never ends, its answer unused
            await agent.process.wait()
        started = [e for e in acp_agent.read_record(record) if e["event"] == "start"]
        for event in started:
            await wait_exited(event["pid"])  # SIGINT from the killed harness's sentinel
        # A new session (the killed turn kept none) whose turns end at once.
        async with running_agent(root, acp_env(root, ["default"]), "--with-bash-daemon") as again:
            await _prompt(again.socket, "after")
            await again.hive_line(lambda r: any(c["body"] == "after" for c in r["carried"]))
            lines = again.hive_lines()
    assert answered["result"]["state"] == "done", answered
    assert "bash-task-shown" in _carried(lines), (lines, again.stderr())
    assert _carried(lines).count("bash-task-shown") == 1, lines


async def test_an_end_answered_inline_in_a_turn_that_delivered_is_never_carried(root: Path) -> None:
    calls_run = [
        {"claude_tool": {"name": "mcp__bash__run", "input": RUN, "call": {"server": "bash", "tool": "run"}}}
    ]
    env = acp_env(root, [[*calls_run, {"text": "seen"}], "default"])
    with trio.fail_after(GUARD):
        async with running_agent(root, env, "--with-bash-daemon") as agent:
            await _prompt(agent.socket, "go")
            await agent.hive_line(lambda r: r["turn"] == 1)
            # Settled by the turn that delivered it: acknowledged, so its loose end goes.
            await wait_gone(agent.state / "mcp-loose-ends" / "bash-task-shown.json")
            await _prompt(agent.socket, "after")
            await agent.hive_line(lambda r: any(c["body"] == "after" for c in r["carried"]))
            lines = agent.hive_lines()
    assert lines[0]["delivered"] and _carried(lines) == ["operator", "operator"], lines
    # Held for its turn if it came while the turn ran (then gone with what it carried), else
    # judged by the turn's record as it came: never queued.
    journal = [json.loads(line) for line in (root / "state" / "queue").read_bytes().splitlines()]
    shown = [r["item"] for r in journal if r["op"] == "add" and r["item"]["from"] == "bash-task-shown"]
    carried = [seq for r in journal if r["op"] == "carried" for seq in r["seqs"]]
    assert all(item["shown_at"] and item["seq"] in carried for item in shown), journal
