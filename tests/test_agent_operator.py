"""The operator's side: ``hive agent status|prompt|compact|log`` against a real hive-agent, and the
turn log's renderer over real claude stream-json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from hive.agent._render import render_live, render_log
from hive.wake import LineReader
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import (
    HOLD,
    claude_env,
    claude_start,
    installed_fake,
    release,
    running_agent,
    scratch_root,
)

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples"
# A bound on the whole test, which waits on events throughout; 60 s was outlasted in CI under load.
GUARD = 180


@pytest.fixture
def root() -> Iterator[Path]:
    with scratch_root("hive-h-") as path:
        yield path


@pytest.fixture
def fake(root: Path) -> Iterator[FakeClaude]:
    with installed_fake(root) as claude:
        yield claude


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


def test_following_shows_the_stream_as_it_comes_then_the_turns_record() -> None:
    init, *rest = sample("01_text_turn.jsonl")
    first = render_live(init, started=False)
    assert first[0] == "── a turn"
    assert render_live(rest[0], started=True)[:1] != ["── a turn"]
    ending = render_live(record(4), started=True)
    assert ending[0].startswith("── turn 4")
    assert ending[-2].startswith("   ended: completed")


def hive_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hive.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=GUARD,
    )


async def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return await trio.to_thread.run_sync(lambda: hive_cli(*args, env=env))


async def test_the_operator_cli_over_a_running_agent(root: Path, fake: FakeClaude) -> None:
    fake.script(HOLD, [{"default_turn": True}], [{"default_turn": True}])
    state = root / "state"
    env = {"HIVE_STATE_DIR": str(state)}
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            idle = await run_cli("agent", "status", env=env)
            assert idle.returncode == 0, idle.stderr
            assert idle.stdout.splitlines()[:3] == [
                "agent: idle",
                "session: (none yet)",
                "queue: 0 messages waiting for a turn",
            ]
            sent = await run_cli("agent", "prompt", "look at the build", env=env)
            assert sent.returncode == 0 and "queued" in sent.stdout
            first = await claude_start(fake, 1)
            assert first["prompt"] == "[message from operator]\nlook at the build"
            asked = await run_cli("agent", "compact", env=env)
            assert asked.returncode == 0
            status = await run_cli("agent", "status", "--json", "--socket", str(agent.socket))
            data = json.loads(status.stdout)
            assert (data["state"], data["carrying"], data["compact_pending"]) == ("turn", 1, True)
            follower = await trio.lowlevel.open_process(
                [sys.executable, "-m", "hive.cli", "agent", "log", "--follow"],
                stdout=subprocess.PIPE,
                env={**os.environ, **env},
                # A suite started in the background (`cmd &`) inherits SIGINT ignored, and a
                # Python started so keeps ignoring it: the follower must take the SIGINT it is sent.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            assert follower.stdout is not None
            async with follower.stdout:
                reader = LineReader(follower.stdout)
                try:
                    await release(fake, first)
                    await claude_start(fake, 2)  # the compaction, right after the turn
                    await agent.hive_line(lambda r: r["kind"] == "compact")
                    seen: list[str] = []
                    while not any(line.startswith("── compaction") for line in seen):
                        line = await reader.readline()
                        assert line is not None, seen
                        seen.append(line.decode())
                finally:
                    follower.send_signal(signal.SIGINT)
                    code = await follower.wait()
            assert code == 0
            assert seen[0] == "── a turn"
            assert any(line.startswith("── turn 1 · ") for line in seen)
    shown = hive_cli("agent", "log", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("── turn 1 · ")
    assert "   message from operator: look at the build" in shown.stdout.splitlines()
    assert "── compaction 2 · " in shown.stdout
    raw = hive_cli("agent", "log", "--json", env=env)
    assert [json.loads(line)["type"] for line in raw.stdout.splitlines()][-1] == "hive"
    gone = hive_cli("agent", "status", env=env)
    assert gone.returncode == 1
    assert "no agent socket" in gone.stderr
