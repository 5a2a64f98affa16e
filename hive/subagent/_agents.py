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
from collections.abc import Callable, Iterator
from typing import Protocol

from hive._proc import GroupLeader, Pidfd, start_time
from hive.runtime import AgentProcess, watching_agents

log = logging.getLogger(__name__)


class TurnAgent(Protocol):
    """What the manager needs of an agent process (``hive.runtime.AgentProcess`` is one)."""

    @property
    def pid(self) -> int:
        """Its process id (the leader of its process group)."""
        ...

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has exited, else None."""
        ...

    @property
    def signalled(self) -> bool:
        """Whether it was sent its SIGINT."""
        ...

    def interrupt(self) -> bool:
        """SIGINT to its process group, once; False if sent before or the agent is gone."""
        ...

    async def wait(self) -> int:
        """Wait for it to exit; its exit status."""
        ...


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


class AdoptedAgent(GroupLeader):
    """An agent an earlier daemon started, still running: watched through its pidfd."""

    returncode: int | None = None
    """0 once it has exited: it is not this daemon's child, so its real status cannot be read."""

    def interrupt(self) -> bool:
        if self.returncode is not None or not super().interrupt():
            return False
        log.info("sent SIGINT to the process group %d, an agent left by an earlier daemon", self.pid)
        return True

    async def wait(self) -> int:
        if self.returncode is None:
            await self.pidfd.wait()
            self.returncode = 0
            self.close()
        return self.returncode

    def close(self) -> None:
        self.pidfd.close()


class SystemHost:
    """Real processes."""

    @contextlib.contextmanager
    def watching(self, watcher: Callable[[TurnAgent], None]) -> Iterator[None]:
        """Call ``watcher`` with each agent a runtime starts inside the block."""

        def seen(agent: AgentProcess) -> None:
            watcher(agent)

        with watching_agents(seen):
            yield

    def start_time(self, agent: TurnAgent) -> int:
        """Its start time in the kernel's clock ticks (0 if it is gone)."""
        return start_time(agent.pid) or 0

    def adopt(self, pid: int, start: int, *, signalled: bool) -> TurnAgent | None:
        """The agent an earlier daemon started, watched through a pidfd, if it still runs."""
        pidfd = Pidfd.adopt(pid, start)
        return None if pidfd is None else AdoptedAgent(pidfd, signalled=signalled)
