"""hive's ACP backend driving a real published ACP agent, claude-agent-acp, offline against the
fake Messages API."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from fixtures.fake_api_control import FakeApi
from hive.acp import AcpRuntime, open_acp_runtime
from hive.runtime import SIGNALS_SENT, Backend, Config, RuntimeSpec, StopReason
from hive.sink import MemorySink
from tests.helpers.gates import assert_nobody_reads, run_cancelled_at_the_gate, sink_lines
from tests.helpers.processes import wait_exited

TURN = 120


PROTOCOL_PIN = {"CLAUDE_AGENT_ACP_PROTOCOL": "v1"}
"""What claude-agent-acp serves. 0.101.0 answers two protocols on one stdio (its ``dist/serve.js``):
ACP v1, and the draft ACP v2 to a client whose ``initialize`` asks for version 2 or later. This
variable chooses: unset or ``auto`` both, ``v1`` the v1 agent alone (a client asking for 2 is
negotiated down to 1), ``v2`` the draft alone; any other value stops the agent at its start. hive
asks for 1, so it gets v1 either way; the pin makes that hold on the agent's side as well, so
these tests exercise the v1 agent alone, whatever its router would choose."""


@asynccontextmanager
async def acp_runtime(
    agent: Path, env: dict[str, str], workdir: Path, session_id: str | None = None, **config: Any
) -> AsyncIterator[AcpRuntime]:
    spec = RuntimeSpec(backend=Backend.ACP, command=str(agent), env=tuple({**env, **PROTOCOL_PIN}.items()))
    async with open_acp_runtime(spec, Config(cwd=workdir, **config), session_id) as runtime:
        yield runtime


async def test_initialize_a_turn_model_and_effort_and_load_after_a_restart(
    real_acp_agent: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "Hello from the real agent."})
    sink = MemorySink()
    with trio.fail_after(TURN):
        async with acp_runtime(
            real_acp_agent, claude_env, claude_workdir, model="sonnet", effort="low"
        ) as runtime:
            assert runtime.agent_capabilities.load_session
            assert runtime.agent_capabilities.mcp_capabilities.http
            outcome = await runtime.run("say hello", sink)
            session = runtime.session_id
            assert "sonnet" in runtime.choices().models() and "low" in runtime.choices().efforts()
            assert runtime.option("model").current_value == "sonnet"  # type: ignore[union-attr]
            assert runtime.option("thought_level").current_value == "low"  # type: ignore[union-attr]
        async with acp_runtime(real_acp_agent, claude_env, claude_workdir, session_id=session) as again:
            later = await again.run("still there?", MemorySink())
    assert (outcome.stop_reason, outcome.is_error) == (StopReason.COMPLETED, False)
    assert outcome.result == "Hello from the real agent."
    assert sink_lines(sink)[0]["type"] == "system"
    assert sink_lines(sink)[-1]["type"] == "result"
    assert later.session_id == session and later.stop_reason is StopReason.COMPLETED
    assert "sonnet" in fake_api.requests("main")[0]["model"]


async def test_a_cancel_during_a_tool_is_answered_cancelled_and_stops_the_tool(
    real_acp_agent: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fifo = claude_workdir / "gate"
    os.mkfifo(fifo)
    fake_api.set_scenario({"mode": "bash", "command": f"cat {fifo}"})
    sink = MemorySink()
    with trio.fail_after(TURN):
        async with acp_runtime(real_acp_agent, claude_env, claude_workdir) as runtime:
            outcome, writer = await run_cancelled_at_the_gate(runtime, fifo, sink)
            after = await runtime.run("and now?", MemorySink())
    assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (StopReason.CANCELLED, False, True)
    assert sink_lines(sink)[-1]["terminal_reason"] == "aborted_tools"
    uses = [b for line in sink_lines(sink) if line["type"] == "assistant" for b in line["message"]["content"]]
    assert [b["input"].get("command") for b in uses if b["type"] == "tool_use"] == [f"cat {fifo}"]
    assert after.stop_reason is StopReason.COMPLETED
    assert_nobody_reads(writer, "the agent")


async def test_compact_uses_the_agents_compact_command(
    real_acp_agent: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "Noted."})
    sink = MemorySink()
    with trio.fail_after(TURN):
        async with acp_runtime(real_acp_agent, claude_env, claude_workdir) as runtime:
            await runtime.run("remember 7", MemorySink())
            assert "compact" in runtime.commands
            session = runtime.session_id
            await runtime.compact(sink)
            assert runtime.session_id == session  # compacted in place, not archived
            after = await runtime.run("what was it?", MemorySink())
    assert fake_api.requests("compact")
    assert sink_lines(sink)[-1]["type"] == "result" and sink_lines(sink)[-1]["is_error"] is False
    assert after.stop_reason is StopReason.COMPLETED


async def test_closing_the_runtime_leaves_no_process_behind(
    real_acp_agent: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "hi"})
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(TURN):
        async with acp_runtime(real_acp_agent, claude_env, claude_workdir) as runtime:
            await runtime.run("hi", MemorySink())
            group = runtime.agent_pid
            assert group is not None
            processes = members(group)
            assert len(processes) >= 2  # the agent and the claude it runs
    assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]
    with trio.fail_after(20):
        for pid in processes:
            await wait_exited(pid)
    assert members(group) == []


def members(pgid: int) -> list[int]:
    """Live processes of the process group ``pgid``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != b"Z" and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found
