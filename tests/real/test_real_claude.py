"""hive's claude backend driving the real Claude Code CLI, offline against the fake Messages API."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from fixtures.fake_api_control import FakeApi
from hive.claude import InfiniteSession, open_claude_runtime
from hive.runtime import SIGNALS_SENT, Config, RuntimeSpec, StopReason
from hive.sink import AssistantMessage, MemorySink, ToolUseBlock
from tests.helpers.gates import assert_nobody_reads, run_cancelled_at_the_gate, sink_lines

TURN = 90  # seconds: a hang fails the test instead of wedging the run


@asynccontextmanager
async def claude_runtime(
    real_claude: Path, env: dict[str, str], workdir: Path, **config: object
) -> AsyncIterator[InfiniteSession]:
    spec = RuntimeSpec(claude_command=str(real_claude))
    settings = Config(cwd=workdir, env=tuple(env.items()), model="sonnet", **config)  # type: ignore[arg-type]
    async with open_claude_runtime(spec, settings) as runtime:
        yield runtime


async def test_a_text_turn_and_a_resumed_one(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "Hello through hive."})
    first, second = MemorySink(), MemorySink()
    with trio.fail_after(TURN):
        async with claude_runtime(real_claude, claude_env, claude_workdir) as runtime:
            one = await runtime.run("say hello", first)
            fake_api.set_scenario({"mode": "text", "text": "Still here."})
            two = await runtime.run("and again", second)
    assert (one.stop_reason, one.is_error, one.synthesized) == (StopReason.COMPLETED, False, False)
    assert one.result == "Hello through hive."
    assert sink_lines(first)[-1]["type"] == "result"
    assert one.session_id is not None and two.session_id == one.session_id
    assert two.result == "Still here."
    main = fake_api.requests("main")
    assert [r["prompt"] for r in main] == ["say hello", "and again"]
    assert main[1]["n_messages"] > main[0]["n_messages"]  # the resumed turn carried the first one
    assert first.usages and first.usages[-1].used > 0


async def test_a_tool_turn(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "bash", "command": "echo from-the-tool", "after_tool_text": "Tool done."})
    sink = MemorySink()
    with trio.fail_after(TURN):
        async with claude_runtime(
            real_claude, claude_env, claude_workdir, allowed_tools=("Bash",)
        ) as runtime:
            outcome = await runtime.run("run something", sink)
    assert (outcome.stop_reason, outcome.is_error, outcome.result) == (
        StopReason.COMPLETED,
        False,
        "Tool done.",
    )
    uses = [
        b
        for m in sink.messages()
        if isinstance(m, AssistantMessage)
        for b in m.message.content
        if isinstance(b, ToolUseBlock)
    ]
    assert [u.name for u in uses] == ["Bash"]
    results = [line for line in sink_lines(sink) if line["type"] == "user"]
    assert "from-the-tool" in json.dumps(results)


async def test_compact_on_a_real_session(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "Noted."})
    sink = MemorySink()
    with trio.fail_after(TURN):
        async with claude_runtime(real_claude, claude_env, claude_workdir) as runtime:
            await runtime.run("remember the number 7", MemorySink())
            await runtime.compact(sink)
            session = runtime.session_id
            after = await runtime.run("what was it?", MemorySink())
    boundaries = [line for line in sink_lines(sink) if line.get("subtype") == "compact_boundary"]
    assert len(boundaries) == 1
    assert sink_lines(sink)[-1]["type"] == "result"
    assert fake_api.requests("compact")
    assert after.session_id == session and after.stop_reason is StopReason.COMPLETED


async def test_sigint_during_a_tool_stops_it_and_claude_reports_the_turn(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    # The tool's command blocks reading a FIFO: opening its other end returns exactly when the
    # command runs, and writing to it fails once no command reads it any more.
    fifo = claude_workdir / "gate"
    os.mkfifo(fifo)
    fake_api.set_scenario({"mode": "bash", "command": f"cat {fifo}"})
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(TURN):
        async with claude_runtime(
            real_claude, claude_env, claude_workdir, allowed_tools=("Bash",)
        ) as runtime:
            outcome, writer = await run_cancelled_at_the_gate(runtime, fifo, sink)
    (result,) = [line for line in sink_lines(sink) if line["type"] == "result"]
    assert sink_lines(sink)[-1] == result
    if "hive" not in result:
        # claude's own answer to the SIGINT (most runs): the interrupted turn, and its result.
        assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (
            StopReason.CANCELLED,
            False,
            True,
        ), outcome.errors
        # The CLI runs a tool while the model's message still streams: a SIGINT in that window
        # (seen under load) is reported as an aborted stream, the tool's command stopped the same.
        assert result.get("terminal_reason") in ("aborted_tools", "aborted_streaming")
    else:
        # claude may give none: the real CLI exits without one after a stalled stream, and one
        # slower than the stop grace under load gives none in time. hive's result says so.
        assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (
            StopReason.CANCELLED,
            True,
            True,
        ), outcome.errors
        assert "the turn was cancelled without a result" in outcome.errors[0]
    assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]
    assert_nobody_reads(writer, "claude")
