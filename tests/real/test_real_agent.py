"""hive-agent driving the real peers offline: the Claude Code CLI and claude-agent-acp against the
fake Messages API. A wake produces a turn whose prompt reaches the API; the scripted model calls
``mcp__bash__run`` (the bash relay to hive-agent's own daemon) and ``mcp__hyperhive__loose_ends``
(through hive-hyperhive-mcp, the relay to hive-agent's own hyperhive socket), and both succeed.
And a session of two turns, scripted in one scenario file by the turns' prompts: a tool turn that
starts a task, then, woken by the task's end, a text turn."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from fixtures.fake_api_control import FakeApi
from hive.agent import render_log
from hive.agent_socket import Wake, send_wake
from tests.helpers.harness import running_agent
from tests.real.test_real_acp import PROTOCOL_PIN

TURN = 180

SCENARIO = {
    "mode": "tool",
    "preface": "",
    "steps": [
        {"tool": "mcp__bash__run", "input": {"cmd": "echo from-the-real-tier", "wait_seconds": 10}},
        {"tool": "mcp__hyperhive__loose_ends", "input": {}},
    ],
    "after_tool_text": "Both tools answered.",
}


async def _one_woken_turn(
    root: Path, env: dict[str, str], workdir: Path, fake_api: FakeApi
) -> dict[str, Any]:
    fake_api.set_scenario(SCENARIO)
    with trio.fail_after(TURN):
        async with running_agent(root, env, "--with-bash-daemon", cwd=workdir, whole_env=True) as agent:
            await send_wake(agent.socket, Wake("bash-task-real", "the real tier's wake"))
            record = await agent.hive_line()
    assert agent.process.returncode == 0, agent.stderr()
    return record


def _check_requests(fake_api: FakeApi) -> None:
    main = fake_api.requests(kind="main")
    assert "[wake from bash-task-real]\nthe real tier's wake" in (main[0]["prompt"] or ""), main[0]
    # (The CLI offers MCP tools through ToolSearch, deferred: they are not in the first request's
    # list, and a call of one that was never searched for is still served.)
    # The turn's requests end at the first text answer (claude-agent-acp asks for a prompt
    # suggestion afterwards, which the fake answers from the same scenario).
    turn = main[: next(i for i, r in enumerate(main) if r["answer"] == "text") + 1]
    results = [r["tool_results"][0] for r in turn if r.get("tool_results")]
    assert len(results) == 2, turn
    assert results[0]["is_error"] is False and "from-the-real-tier" in results[0]["text"], results[0]
    assert results[1]["is_error"] is False and '"loose_ends"' in results[1]["text"], results[1]


def _check_log(root: Path) -> None:
    """The turn log shows the bash call's whole input and its result as the tool's message, alike
    on both runtimes."""
    log = (root / "state" / "turns.jsonl").read_text().splitlines()
    shown = list(render_log(json.loads(line) for line in log if line.strip()))
    assert '   → mcp__bash__run {"cmd": "echo from-the-real-tier", "wait_seconds": 10}' in shown, shown
    assert any(line.startswith("   ← task ") and ": done, exit code 0 after " in line for line in shown), (
        shown
    )


async def test_the_claude_cli_under_hive_agent(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path, tmp_path: Path
) -> None:
    env = {**claude_env, "HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": str(real_claude)}
    record = await _one_woken_turn(tmp_path, env, claude_workdir, fake_api)
    assert (record["outcome"], record["is_error"]) == ("completed", False), record
    assert record["result"] == "Both tools answered."
    _check_requests(fake_api)
    _check_log(tmp_path)
    # The built-in Bash is not offered at all on claude.
    assert "Bash" not in fake_api.requests(kind="main")[0]["tools"]


async def test_claude_agent_acp_under_hive_agent(
    real_acp_agent: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path, tmp_path: Path
) -> None:
    env = {
        **claude_env,
        "HIVE_RUNTIME": "acp",
        "HIVE_ACP_COMMAND": str(real_acp_agent),
        "HIVE_ACP_ENV": json.dumps(PROTOCOL_PIN),
        "PATH": f"{Path(sys.executable).parent}:{claude_env.get('PATH', '')}",
    }
    record = await _one_woken_turn(tmp_path, env, claude_workdir, fake_api)
    assert (record["outcome"], record["is_error"]) == ("completed", False), record
    _check_requests(fake_api)
    _check_log(tmp_path)


async def test_one_scenario_scripts_a_tool_turn_then_a_woken_text_turn_on_claude(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path, tmp_path: Path
) -> None:
    # The task reads a FIFO: it cannot end before the test writes to it, after the first turn.
    gate = claude_workdir / "gate"
    os.mkfifo(gate)
    fake_api.set_scenario(
        {
            "text": "No rule answered.",
            "rules": [
                {
                    "when": {"prompt_contains": "start the build"},
                    "mode": "tool",
                    "preface": "",
                    "tool": "mcp__bash__run",
                    "input": {"cmd": f"cat {gate}", "name": "build", "wait_seconds": 0},
                    "after_tool_text": "The build is running.",
                },
                {"when": {"prompt_regex": r"^\[wake from bash-task-build\]"}, "text": "The build is done."},
            ],
        }
    )
    env = {**claude_env, "HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": str(real_claude)}
    with trio.fail_after(TURN):
        async with running_agent(
            tmp_path, env, "--with-bash-daemon", cwd=claude_workdir, whole_env=True
        ) as agent:
            await send_wake(agent.socket, Wake("operator-test", "start the build"))
            first = await agent.hive_line(lambda r: r["turn"] == 1)
            # (Checked before the gate is opened: that open waits for the task to read it.)
            assert (first["outcome"], first["result"]) == ("completed", "The build is running."), first
            writer = await trio.to_thread.run_sync(os.open, gate, os.O_WRONLY)
            try:
                os.write(writer, b"built\n")
            finally:
                os.close(writer)
            second = await agent.hive_line(lambda r: r["turn"] == 2)
    assert (second["outcome"], second["result"]) == ("completed", "The build is done."), second
    assert [c["from"] for c in second["carried"]] == ["bash-task-build"]
    main = fake_api.requests(kind="main")
    assert [(r["rule"], r["answer"]) for r in main] == [(0, "tool_use"), (0, "text"), (1, "text")], main
    assert "task started" in main[1]["tool_results"][0]["text"], main[1]
    assert "built" in main[2]["prompt"], main[2]
    # The turn log shows the tool's text, as on ACP, not the structured content claude passes on.
    log = (agent.state / "turns.jsonl").read_text().splitlines()
    shown = list(render_log(json.loads(line) for line in log if line.strip()))
    assert any(line.startswith("   ← task started: id=build") for line in shown), shown
