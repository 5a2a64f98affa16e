"""The operator's side: ``hive agent status|prompt|compact|log`` against a real hive-agent, and the
turn log's renderer over real claude stream-json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from hive.agent import render_log
from hive.agent_socket import LineReader
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import (
    HOLD,
    claude_env,
    claude_start,
    release,
    running_agent,
)

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples"
# A bound on the whole test, which waits on events throughout; 60 s was outlasted in CI under load.
GUARD = 180


def sample(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / name).read_text().splitlines() if line.strip()]


def record(turn: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "hive",
        "turn": turn,
        "kind": "turn",
        "started": 1000.0,
        "ended": 1002.5,
        "carried": [
            {"seq": 1, "kind": "wake", "from": "bash-task-ab12", "body": "bash task ab12 ended: done"}
        ],
        "outcome": "completed",
        "delivered": True,
        "tokens": {"input_tokens": 1200, "cache_read_input_tokens": 300, "output_tokens": 45},
        "context_used": 50_000,
        "context_size": 200_000,
    }
    return {**base, **fields}


def test_a_turn_shows_its_trigger_text_tool_calls_results_tokens_and_context() -> None:
    text = "\n".join(render_log([*sample("02_tool_turn_with_partial_messages.jsonl"), record(1)]))
    lines = text.splitlines()
    assert lines[0].startswith("── turn 1 · ")
    assert lines[1] == "   wake from bash-task-ab12: bash task ab12 ended: done"
    assert "   agent: I will run a command." in lines
    assert any(line.startswith('   → Bash {"command": "e') for line in lines)
    assert any(line.startswith("   ← hi-from-bash ls: cannot access") for line in lines)
    assert "   agent: Tool finished; all done." in lines
    assert "   ended: completed · 2.5 s · tokens 1,500 in / 45 out · context 50,000/200,000 (25%)" in lines
    assert "stream_event" not in text


def test_errors_failed_turns_compactions_and_a_turn_in_progress() -> None:
    failed = record(
        2, outcome="not started", delivered=False, error="no such agent", tokens={}, context_used=None
    )
    compaction = record(3, kind="compact", requested_by="agent", carried=[], tokens={})
    lines = list(
        render_log(
            [
                *sample("05_api_error_400.jsonl"),
                record(1, outcome="completed"),
                failed,
                compaction,
                *sample("01_text_turn.jsonl")[:2],
            ]
        )
    )
    assert any(line.startswith("   error (") for line in lines), lines
    assert "   ended: not started · 2.5 s · its messages wait for the next turn" in lines
    assert "   error: no such agent" in lines
    assert any(
        line.startswith("── compaction 3 · ") and line.endswith("asked for by agent") for line in lines
    )
    assert "── a turn in progress" in lines


CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("HIVE_STATE_DIR", "HIVE_AGENT_SOCKET")}
"""The test's environment without the variables that would name an agent for the CLI."""


def hive_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hive.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**CLEAN_ENV, **(env or {})},
        input=stdin,
        timeout=GUARD,
    )


async def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return await trio.to_thread.run_sync(lambda: hive_cli(*args, env=env, stdin=stdin))


async def read_turns(reader: LineReader, ends: int) -> list[str]:
    """What ``hive agent log --follow`` prints up to the blank line after the ``ends``-th end."""
    seen: list[str] = []
    while True:
        line = await reader.readline()
        assert line is not None, seen
        seen.append(line.decode())
        if seen[-1] == "" and sum(text.startswith("   ended: ") for text in seen) == ends:
            return seen


async def test_the_operator_cli_over_a_running_agent(root: Path, fake: FakeClaude) -> None:
    """Issue 22: every subcommand finds the agent by --state-dir; a prompt in unquoted words, and one
    past Linux's limit on an argument through stdin; status names the running turn and the last
    that ended; --follow prints what `hive agent log` prints, byte for byte."""
    fake.script(HOLD, [{"default_turn": True}], HOLD)
    state = ("--state-dir", str(root / "state"))
    big = "the first words " + "m" * (200 * 1024) + " the last words"
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            follower = await trio.lowlevel.open_process(
                [sys.executable, "-m", "hive.cli", "agent", "log", "--follow", *state],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=CLEAN_ENV,
            )
            assert follower.stdout is not None and follower.stderr is not None
            async with follower.stdout, follower.stderr:
                try:
                    idle = await run_cli("agent", "status", *state)
                    assert idle.returncode == 0, idle.stderr
                    assert idle.stdout.splitlines() == [
                        "agent: idle",
                        "session: (none yet)",
                        "queue: 0 messages waiting for a turn",
                        "last ended: none yet",
                    ]
                    sent = await run_cli("agent", "prompt", *state, "look", "at", "the", "build")
                    assert sent.returncode == 0 and "queued" in sent.stdout, sent.stderr
                    first = await claude_start(fake, 1)
                    assert first["prompt"] == "[message from operator]\nlook at the build"
                    during = await run_cli("agent", "status", *state)
                    assert during.stdout.startswith("agent: in turn 1 for "), during.stdout
                    assert during.stdout.splitlines()[0].endswith("), carrying 1 message")
                    assert "last ended: none yet" in during.stdout.splitlines()
                    asked = await run_cli("agent", "compact", *state)
                    assert asked.returncode == 0
                    status = await run_cli("agent", "status", "--json", "--socket", str(agent.socket))
                    data = json.loads(status.stdout)
                    assert (data["state"], data["carrying"], data["compact_pending"]) == ("turn", 1, True)
                    assert (data["running_turn"], data["last_turn"]) == (1, None)
                    await release(fake, first)
                    await claude_start(fake, 2)  # the compaction, right after the turn
                    await agent.hive_line(lambda r: r["kind"] == "compact")
                    # Past Linux's 128 KiB limit on an argument: through stdin.
                    piped = await run_cli("agent", "prompt", *state, "-", stdin=big)
                    assert piped.returncode == 0, piped.stderr
                    third = await claude_start(fake, 3)
                    assert third["prompt"] == f"[message from operator]\n{big}"
                    later = (await run_cli("agent", "status", *state)).stdout.splitlines()
                    assert later[0].startswith("agent: in turn 3 for "), later
                    assert any(line.startswith("last ended: compaction 2, completed, at ") for line in later)
                    await release(fake, third)
                    await agent.hive_line(lambda r: r["turn"] == 3)
                    seen = await read_turns(LineReader(follower.stdout), ends=3)
                finally:
                    follower.send_signal(signal.SIGINT)
                    code = await follower.wait()
                waiting = (await follower.stderr.receive_some(65536)).decode()
            assert code == 0
            assert "no turn in" in waiting and "yet; waiting for the first" in waiting
            shown = await run_cli("agent", "log", *state)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "".join(line + "\n" for line in seen)  # --follow prints what log prints
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("── turn 1 · ")
    assert lines[1] == "   message from operator: look at the build"  # the message before its answer
    assert "── compaction 2 · " in shown.stdout
    raw = hive_cli("agent", "log", "--json", *state)
    assert [json.loads(line)["type"] for line in raw.stdout.splitlines()][-1] == "hive"
    gone = hive_cli("agent", "status", *state)
    assert gone.returncode == 1
    assert f"no agent socket at {root / 'state' / 'agent.sock'}" in gone.stderr
