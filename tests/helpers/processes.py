"""The tests' processes: waiting for one, ours or not, to exit (on a pidfd), one started with
SIGINT ignored, and ``hive`` run to its end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio


async def wait_exited(pid: int) -> None:
    """Until process ``pid`` has exited (at once if there is none)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@asynccontextmanager
async def started_ignoring_sigint(argv: Sequence[str], **options: object) -> AsyncIterator[trio.Process]:
    """``argv`` started as a shell starts `cmd &`: with SIGINT ignored (a Python started so keeps
    ignoring it). One still running at the end, ignoring the SIGINT under test, gets SIGTERM."""
    process = await trio.lowlevel.open_process(argv, preexec_fn=_ignore_sigint, **options)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await process.wait()


async def receive_until(stream: trio.abc.ReceiveStream, done: Callable[[bytes], bool]) -> bytes:
    """What ``stream`` gives until all of it so far is ``done``."""
    seen = b""
    while not done(seen):
        seen += await stream.receive_some()
    return seen


def run_hive(*args: str | Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``hive ARGS`` run to its end within ``timeout`` seconds, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "hive.cli", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
