"""Tasks and tool commands the test lets end (FIFO gates), and waiting for processes that are not
the test's children."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import trio

from hive.runtime import Runtime, TurnOutcome
from hive.sink import MemorySink
from tests.helpers.daemon import DaemonHandle
from tests.helpers.results import call, structured


def make_gate(root: Path, name: str = "gate") -> Path:
    """A FIFO a task blocks on until the test opens it: the test decides when the task ends."""
    path = root / name
    os.mkfifo(path)
    return path


def open_gate(path: Path, line: str = "go") -> None:
    # The task already has the FIFO open for reading, so a non-blocking open for writing succeeds.
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


async def release_gate(path: Path, line: str = "go") -> None:
    """Open the gate once the task is at it: the open for writing waits (in a worker thread) for
    the task to open the FIFO for reading, so a task that printed its line and has not yet
    reached its ``read`` is waited for, not missed."""

    def release() -> None:
        with open(path, "w") as gate:
            gate.write(f"{line}\n")

    await trio.to_thread.run_sync(release, abandon_on_cancel=True)


async def sigkill(process: trio.Process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    await process.wait()


def gated(gate: Path, code: int = 7) -> str:
    return f"read line < {gate}; echo got $line; exit {code}"


async def start_gated(daemon: DaemonHandle, name: str, gate: Path, code: int = 7) -> int:
    """Start a task that waits on ``gate``; returns its wrapper's pid."""
    async with daemon.session() as session:
        started = structured(await call(session, "run", cmd=gated(gate, code), name=name, wait_seconds=0))
        assert started["state"] == "running"
        status = structured(await call(session, "status", id=name))
    pid = status["pid"]
    assert isinstance(pid, int)
    return pid


def sink_lines(sink: MemorySink) -> list[dict[str, Any]]:
    """Each line a turn wrote to ``sink``, decoded."""
    return [json.loads(line) for line in sink.lines()]


async def run_cancelled_at_the_gate(
    runtime: Runtime, gate: Path, sink: MemorySink
) -> tuple[TurnOutcome, int]:
    """A turn whose tool's command reads ``gate`` (a FIFO), cancelled once that command runs:
    opening the FIFO's other end returns exactly then. Its outcome, and that writing end."""
    writer: list[int] = []

    async def cancel_once_the_tool_runs() -> None:
        writer.append(await trio.to_thread.run_sync(os.open, gate, os.O_WRONLY))
        runtime.canceller().cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_once_the_tool_runs)
        outcome = await runtime.run("wait for the gate", sink)
    return outcome, writer[0]


def assert_nobody_reads(writer: int, who: str) -> None:
    """Closes ``writer``: fails if the tool's command still reads the gate (``who`` left it running)."""
    try:
        os.write(writer, b"anyone there?\n")
    except BrokenPipeError:
        pass  # the tool's command is gone: it was stopped
    else:
        raise AssertionError(f"{who} left its tool's command running")
    finally:
        os.close(writer)
