"""Subagents on the real peers, offline against the fake Messages API, through ``hive-subagent-mcp``:
one on the Claude Code CLI, one on claude-agent-acp; a turn each, then an interrupt mid-tool that
leaves no process behind."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters

from fixtures.fake_api_control import FakeApi
from tests.helpers.mcp_stdio import stdio_session
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of
from tests.helpers.subagents import stop_daemon
from tests.real.test_real_acp import PROTOCOL_PIN

TURN = 120
OURS = (b"hive-subagent-mcp", b"hive.subagent.daemon", b"hive._sentinel")


@pytest.fixture
def state() -> Iterator[Path]:
    """A short state directory: the daemon's socket path must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="hive-rs-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def processes_of(home: Path) -> list[int]:
    """Processes whose environment has ``HOME=home``, but the subagent relay, daemon and its agent sentinel."""
    needle = b"\0HOME=" + os.fsencode(home) + b"\0"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = b"\0" + f.read() + b"\0"
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in environ and not any(name in cmdline for name in OURS):
            found.append(int(entry.name))
    return found


@asynccontextmanager
async def subagent_server(env: dict[str, str], cwd: Path, state: Path) -> AsyncIterator[ClientSession]:
    script = Path(sys.executable).parent / "hive-subagent-mcp"
    params = StdioServerParameters(command=str(script), args=[], env=env, cwd=str(cwd))
    try:
        async with stdio_session(params, state / "server.err") as session:
            yield session
    finally:
        await stop_daemon(state / "state")


async def until_idle(session: ClientSession, name: str, turns: int) -> dict[str, Any]:
    """Wait (30 s a call) until ``name`` has ended turn ``turns`` and its slot is free."""
    while True:
        answer = await call(session, "status", name=name, wait_seconds=30)
        assert not answer.is_error, text_of(answer)
        (found,) = structured(answer)["subagents"]
        if found["slot"] is None and found["turns"] == turns and found["last_turn"]:
            return dict(found)


@pytest.mark.parametrize("backend", ["claude", "acp"])
async def test_a_turn_then_an_interrupt_mid_tool_leaves_no_process_behind(
    real_peer: Path,
    fake_api: FakeApi,
    claude_env: dict[str, str],
    claude_home: Path,
    claude_workdir: Path,
    state: Path,
    backend: str,
) -> None:
    env = {
        **claude_env,
        "HIVE_STATE_DIR": str(state / "state"),
        "HIVE_SUBAGENT_PERMISSION": "allow",
        "HIVE_RUNTIME": backend,
    }
    if backend == "claude":
        env["HIVE_CLAUDE_COMMAND"] = str(real_peer)
    else:
        env["HIVE_ACP_COMMAND"] = str(real_peer)
        env["HIVE_ACP_ENV"] = json.dumps(PROTOCOL_PIN)
    fifo = claude_workdir / "gate"
    os.mkfifo(fifo)
    fake_api.set_scenario({"mode": "text", "text": "Hello from a subagent."})
    with trio.fail_after(TURN):
        async with subagent_server(env, claude_workdir, state) as session:
            started = await call(session, "start", name="helper", prompt="say hello")
            assert not started.is_error, text_of(started)
            first = await until_idle(session, "helper", 1)

            fake_api.set_scenario({"mode": "bash", "command": f"cat {fifo}"})
            continued = await call(session, "continue", name="helper", prompt="wait for the gate")
            assert not continued.is_error, text_of(continued)
            # Opening the FIFO's other end returns exactly when the tool's command runs.
            writer = await trio.to_thread.run_sync(os.open, fifo, os.O_WRONLY)
            try:
                interrupted = await call(session, "interrupt", name="helper")
                assert not interrupted.is_error, text_of(interrupted)
                second = await until_idle(session, "helper", 2)
                for pid in processes_of(claude_home):
                    await wait_exited(pid)
                try:
                    os.write(writer, b"anyone there?\n")
                except BrokenPipeError:
                    tool_stopped = True
                else:
                    tool_stopped = False
            finally:
                os.close(writer)
    assert (first["last_turn"]["stop_reason"], first["last_turn"]["result"]) == (
        "completed",
        "Hello from a subagent.",
    )
    assert first["session_id"] is not None and second["session_id"] == first["session_id"]
    assert structured(interrupted)["sent"] == ("SIGINT" if backend == "claude" else "session/cancel")
    assert second["last_turn"]["stop_reason"] == "interrupted"
    assert tool_stopped, "the tool's command was left running"
    assert processes_of(claude_home) == []
