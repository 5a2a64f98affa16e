"""A tool call in ``hive agent log`` through a real hive-agent reads alike on both runtimes: on an
ACP agent that reports it as claude-agent-acp does (its input sent in parts, its structured result
as rawOutput), the log shows the call's whole input and the same result line as on claude."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from fixtures import acp_agent
from hive.agent_socket import Wake, send_wake
from hive.cli import main
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import GUARD, acp_env, claude_env, running_agent
from tests.helpers.results import ENDED, RUN_INPUT

TOOL_LINES = [
    '   → mcp__bash__run {"cmd": "pytest -x", "name": "tests", "wait_seconds": 30}',
    "   ← task tests: done, exit code 1 after 0.02 s",
]


async def turn_log(root: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What ``hive agent log`` shows of the tool call after one woken turn."""
    with trio.fail_after(GUARD):
        async with running_agent(root, env) as agent:
            await send_wake(agent.socket, Wake("bash-task-tests", "tests ended"))
            record = await agent.hive_line()
    assert record["outcome"] == "completed", agent.stderr()
    capsys.readouterr()
    assert main(["agent", "log", "--state-dir", str(agent.state)]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(("   → ", "   ← "))]


async def test_an_acp_agents_tool_call_shows_its_whole_input_and_claudes_result_line(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"name": "mcp__bash__run", "input": RUN_INPUT, "structured": ENDED, "ask": True}
    env = acp_env(root, [[{"claude_tool": call}, {"text": "The tests failed."}, {"stop": "end_turn"}]])
    assert await turn_log(root, env, capsys) == TOOL_LINES
    # The agent sent the input in parts, and asked (and was allowed) before the call ran.
    record = acp_agent.read_record(root / "acp-record.jsonl")
    updates = [
        e["message"]["params"]["update"]
        for e in record
        if e["event"] == "out" and e["message"].get("method") == "session/update"
    ]
    assert [u["rawInput"] for u in updates if "rawInput" in u] == [
        {},
        {"cmd": "pytest -x"},
        {"cmd": "pytest -x", "name": "tests"},
        RUN_INPUT,
    ]
    assert [e["outcome"] for e in record if e["event"] == "permission"] == ["selected"]


async def test_claudes_tool_call_shows_the_same_lines(
    root: Path, fake: FakeClaude, capsys: pytest.CaptureFixture[str]
) -> None:
    content = json.dumps(ENDED, separators=(",", ":"))
    fake.script(
        [
            {"init": {}},
            {"tool_use": {"name": "mcp__bash__run", "input": RUN_INPUT}},
            {
                "tool_result": {
                    "content": content,
                    "tool_use_result": {"content": content, "structuredContent": ENDED},
                }
            },
            {"text": "The tests failed."},
            {"result": {}},
        ]
    )
    assert await turn_log(root, claude_env(fake), capsys) == TOOL_LINES
