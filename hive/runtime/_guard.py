"""Agents whose whole process group gets SIGINT when the process that started them dies.

The kernel's parent-death signal (``hive._spawn``) reaches an agent's first process only: behind a
wrapper script that runs claude without ``exec``, the shell gets it and claude runs on. Inside
``guarding_agents``, each agent ``start_agent`` spawns is handed instead to a sentinel
(``hive._sentinel``), one small process for the whole block, which sends SIGINT to the agent's
process group when this process dies (or the block ends) while the agent runs: every process
of the agent, once, as a turn's stop does.

The sentinel is told each agent over a pipe, a line of a few bytes written at the spawn: the
spawn asks for no parent-death signal. Where the sentinel cannot be started, or has gone,
agents are spawned with the parent-death signal as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import trio

from hive._when import in_seconds

log = logging.getLogger(__name__)

_HIVE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
_PROGRAM = f"import sys; sys.path.insert(0, {_HIVE_ROOT!r}); from hive._sentinel import main; main()"
EXIT_GRACE = 5.0
"""How long the end of ``guarding_agents`` waits for the sentinel to exit."""


@attrs.define(eq=False)
class Sentinel:
    """The running sentinel, and the (non-blocking) end of the pipe it reads."""

    process: trio.Process
    _pipe: int

    def running(self) -> bool:
        return self._pipe >= 0 and self.process.returncode is None

    def guard(self, pid: int, started: int) -> bool:
        """Have the sentinel SIGINT the process group ``pid`` (started at ``started``) leads if
        this process dies while it runs; False (with a warning) if it cannot be told."""
        try:
            os.write(self._pipe, f"{pid} {started}\n".encode())
        except OSError as exc:
            log.warning(
                "cannot hand agent pid %d to the agent sentinel (pid %d): %s; it will not get SIGINT if "
                "this process dies",
                pid,
                self.process.pid,
                exc,
            )
            return False
        return True

    def close(self) -> None:
        """End the pipe: the sentinel sends SIGINT to the agents still running, then exits."""
        if self._pipe >= 0:
            pipe, self._pipe = self._pipe, -1
            os.close(pipe)


_sentinel: contextvars.ContextVar[Sentinel | None] = contextvars.ContextVar("_sentinel", default=None)


def current_sentinel() -> Sentinel | None:
    """The sentinel of the innermost ``guarding_agents`` block, if it is running."""
    sentinel = _sentinel.get()
    return sentinel if sentinel is not None and sentinel.running() else None


@contextlib.asynccontextmanager
async def guarding_agents() -> AsyncIterator[None]:
    """Inside the block (this task, and the tasks it starts meanwhile), every agent that
    ``start_agent`` spawns gets SIGINT to its whole process group if this process dies while
    the agent runs, or when the block ends with the agent still running. At the end, the
    sentinel is waited for (at most ``EXIT_GRACE``)."""
    read, write = os.pipe()
    process: trio.Process | None = None
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-I", "-S", "-c", _PROGRAM],
            stdin=read,
            # Holding no pipe of this process's: a starter reading its stdout to the end (a daemon's
            # --ready-fd 1) would wait for the sentinel too.
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        log.warning("cannot start the agent sentinel (%s): only each agent's first process gets SIGINT", exc)
    finally:
        os.close(read)  # the sentinel's now
        if process is None:
            os.close(write)
    if process is None:
        yield
        return
    os.set_blocking(write, False)
    sentinel = Sentinel(process, write)
    token = _sentinel.set(sentinel)
    try:
        yield
    finally:
        _sentinel.reset(token)
        sentinel.close()
        with trio.move_on_after(EXIT_GRACE, shield=True):
            await process.wait()
        if process.returncode is None:
            log.warning(
                "the agent sentinel (pid %d) did not exit within %s of its pipe's end; it is left running",
                process.pid,
                in_seconds(EXIT_GRACE),
            )
