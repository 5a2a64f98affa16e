"""Agent processes: started leading their own process group, stopped by SIGINT to it, never more.

Trio's own stops send SIGTERM and then SIGKILL (run_process's default deliver_cancel,
Process.aclose); an agent is never handed to them. Stopping is SIGINT to the group and
waiting; an agent that ignores it keeps running, and the caller moves on.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from hive.runtime._errors import AgentUnavailable

log = logging.getLogger(__name__)

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_SIZE = 1 << 20


@attrs.frozen
class SentSignal:
    pid: int
    signal: str
    at: float


SIGNALS_SENT: list[SentSignal] = []
"""Every signal this process sent to an agent, in order (tests read it)."""

RUNNING: set[AgentProcess] = set()
"""Every agent started and not yet reaped. An agent that ignored SIGINT may outlive the
runtime that started it; it stays referenced here, never killed, until it exits and is reaped."""


@attrs.define(eq=False)
class AgentProcess:
    process: trio.Process
    argv: tuple[str, ...]
    signalled: bool = False
    """Whether it has been sent SIGINT (it is sent at most once: a second SIGINT makes some
    agents quit at once, without their own end of the turn)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def interrupt(self) -> bool:
        """SIGINT to the agent's process group, once; False if it was sent before or the
        agent is gone."""
        if self.signalled or self.process.returncode is not None:
            return False
        try:
            os.killpg(self.process.pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        self.signalled = True
        SIGNALS_SENT.append(SentSignal(self.process.pid, "SIGINT", time.time()))
        log.info("sent SIGINT to %s (process group %d)", self.argv[0], self.process.pid)
        return True

    async def wait(self) -> int:
        """Wait for the agent to exit (reaping it); its exit status."""
        status = await self.process.wait()
        RUNNING.discard(self)
        return status


AgentWatcher = Callable[[AgentProcess], None]
_watcher: contextvars.ContextVar[AgentWatcher | None] = contextvars.ContextVar("_watcher", default=None)


@contextlib.contextmanager
def watching_agents(watcher: AgentWatcher) -> Iterator[None]:
    """Call ``watcher`` with each agent process started inside the block (by this task, or by
    tasks it starts meanwhile), just after its spawn: so a caller of a runtime can tell which
    processes a turn of its own started, and wait for their exit."""
    token = _watcher.set(watcher)
    try:
        yield
    finally:
        _watcher.reset(token)


@attrs.define(eq=False)
class AgentGroup:
    """The agent processes one runtime started. Closing it sends SIGINT to those still
    running and waits a bounded grace for them; one that ignores SIGINT is left running."""

    _agents: set[AgentProcess] = attrs.field(factory=set)

    def add(self, agent: AgentProcess) -> None:
        self._agents = {a for a in self._agents if a.returncode is None}
        self._agents.add(agent)

    async def close(self, grace: float) -> None:
        running = [agent for agent in self._agents if agent.returncode is None]
        self._agents.clear()
        for agent in running:
            agent.interrupt()
        with trio.move_on_after(grace, shield=True):
            for agent in running:
                await agent.wait()
        for agent in running:
            if agent.returncode is None:
                log.warning(
                    "%s (pid %d) did not exit within %.1f s of SIGINT; it is left running",
                    agent.argv[0],
                    agent.pid,
                    grace,
                )


async def start_agent(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: int | None = subprocess.DEVNULL,
) -> AgentProcess:
    """Start an agent in a new session (so it leads its process group), its stdout and stderr piped."""
    try:
        process = await trio.lowlevel.open_process(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise AgentUnavailable(
            f"cannot start {argv[0]!r}: no such executable (is it installed and on PATH?)"
        ) from None
    except PermissionError:
        raise AgentUnavailable(f"cannot start {argv[0]!r}: permission denied") from None
    except OSError as exc:
        raise AgentUnavailable(f"cannot start {argv[0]!r} in {cwd}: {exc}") from None
    if isinstance(process.stdout, trio.lowlevel.FdStream):
        _widen_pipe(process.stdout.fileno())
    agent = AgentProcess(process, tuple(argv))
    RUNNING.add(agent)
    watcher = _watcher.get()
    if watcher is not None:
        watcher(agent)
    return agent


def _widen_pipe(fd: int) -> None:
    """Let the agent's stdout pipe hold 1 MiB rather than 64 KiB: a fast writer then wakes the
    reader a sixteenth as often. Best effort (the system's limit may be lower)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)


@attrs.define
class StderrTail:
    """The last ``limit`` bytes an agent wrote to stderr, drained as they come."""

    limit: int = 16 * 1024
    _data: bytearray = attrs.field(factory=bytearray)

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            while chunk := await stream.receive_some(65536):
                self._data += chunk
                if len(self._data) > 2 * self.limit:
                    del self._data[: len(self._data) - self.limit]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def text(self) -> str:
        return bytes(self._data[-self.limit :]).decode("utf-8", errors="replace")
