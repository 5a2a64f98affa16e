"""The agent processes of subagent turns, as the manager sees them.

A turn's agents are those its runtime started (``hive.runtime.watching_agents`` names them
as they spawn). An agent an earlier daemon started, found alive after a restart, is
*adopted*: watched through a pidfd (it is not this daemon's child), and stopped, like every
agent, with SIGINT to its process group and nothing more. The manager takes a ``Host`` so
that tests can put fake processes on virtual time in the place of real ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterator
from typing import Protocol

import attrs
import trio

from hive.runtime import AgentProcess, watching_agents

log = logging.getLogger(__name__)


class TurnAgent(Protocol):
    """What the manager needs of an agent process (``hive.runtime.AgentProcess`` is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    @property
    def signalled(self) -> bool: ...

    def interrupt(self) -> bool:
        """SIGINT to its process group, once; False if sent before or the agent is gone."""
        ...

    async def wait(self) -> int: ...


class Host(Protocol):
    def watching(self, watcher: Callable[[TurnAgent], None]) -> contextlib.AbstractContextManager[None]:
        """Call ``watcher`` with each agent a runtime starts inside the block."""
        ...

    def start_time(self, agent: TurnAgent) -> int:
        """What tells this process from a later one with the same pid."""
        ...

    def adopt(self, pid: int, start: int, *, signalled: bool) -> TurnAgent | None:
        """The agent an earlier daemon started, if it still runs (None if it is gone)."""
        ...


def process_start(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (the process's start, in clock ticks from boot)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    fields = data.rsplit(b")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None


@attrs.define(eq=False)
class AdoptedAgent:
    """An agent an earlier daemon started, still running: watched through its pidfd."""

    _pid: int
    _pidfd: int
    signalled: bool
    returncode: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def interrupt(self) -> bool:
        if self.signalled or self.returncode is not None:
            return False
        try:
            # The leader is alive (its pidfd says so below), so its group id is still its own.
            signal.pidfd_send_signal(self._pidfd, 0)
            os.killpg(self._pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        self.signalled = True
        log.info("sent SIGINT to the process group %d, an agent left by an earlier daemon", self._pid)
        return True

    async def wait(self) -> int:
        if self.returncode is None:
            with contextlib.suppress(trio.ClosedResourceError):
                await trio.lowlevel.wait_readable(self._pidfd)
            self.returncode = 0  # not our child: its status is not ours to read
            self.close()
        return self.returncode

    def close(self) -> None:
        if self._pidfd >= 0:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1


class SystemHost:
    """Real processes."""

    @contextlib.contextmanager
    def watching(self, watcher: Callable[[TurnAgent], None]) -> Iterator[None]:
        def seen(agent: AgentProcess) -> None:
            watcher(agent)

        with watching_agents(seen):
            yield

    def start_time(self, agent: TurnAgent) -> int:
        return process_start(agent.pid) or 0

    def adopt(self, pid: int, start: int, *, signalled: bool) -> TurnAgent | None:
        try:
            pidfd = os.pidfd_open(pid)
        except (ProcessLookupError, PermissionError):
            return None
        # Checked after the pidfd is open: the pidfd now pins this very process.
        if process_start(pid) != start:
            os.close(pidfd)
            return None
        return AdoptedAgent(pid, pidfd, signalled)
