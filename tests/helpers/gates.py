"""Tasks the test lets end (FIFO gates), and waiting for processes that are not the test's children."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

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
