"""Supervising a daemon the harness starts: started again, after a backoff, whenever it ends.

:func:`supervise` runs a daemon as long as it is not cancelled: each start is a block (the
daemon's context manager) that ends with the daemon's SIGINT when the supervision is cancelled,
and whose daemon, when it exits on its own (or fails to start), is started again after
:class:`Backoff`'s delay. Each change of the daemon's :class:`~hive.agent_socket.DaemonHealth` is
reported, for the harness's status and for the outage file its relays read.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive._files import write_atomic
from hive._when import clock, in_seconds
from hive.agent_socket import DaemonHealth
from hive.errors import HiveError

log = logging.getLogger("hive.agent")


class Child(Protocol):
    """A started daemon: its pid, and its exit to await."""

    @property
    def pid(self) -> int: ...

    async def wait(self) -> int: ...


Start = Callable[[], AbstractAsyncContextManager[Child]]
"""Starts the daemon: the block holds it running (it is ready once the block starts), and its
end stops it with SIGINT if it still runs."""


@attrs.frozen
class Backoff:
    """How long to wait before starting a daemon that ended: ``first``, doubling after each end
    up to ``most``; back to ``first`` after a run of ``steady`` seconds or more."""

    first: float = 0.5
    most: float = 30.0
    steady: float = 60.0

    def next(self, last: float | None, ran: float) -> float:
        """The delay after a run of ``ran`` seconds, the delay before it having been ``last``
        (None: it was the first start)."""
        if last is None or ran >= self.steady:
            return self.first
        return min(last * 2, self.most)


def exit_text(status: int) -> str:
    """How a daemon ended, from its exit status (negative: the signal that killed it)."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


async def supervise(
    name: str,
    start: Start,
    report: Callable[[DaemonHealth], None],
    *,
    backoff: Backoff = Backoff(),
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep the daemon ``name`` running until cancelled (its SIGINT then ends it). Started once
    its first start is ready (the pid); an error of that first start is raised, as a bad setting
    (unless a signal killed the daemon before it was ready), while a later one is retried after the
    backoff."""
    delay: float | None = None
    restarts = 0
    ended: str | None = None
    started = False
    while True:
        began = trio.current_time()
        try:
            async with start() as child:
                report(DaemonHealth("running", time.time(), child.pid, restarts, last_exit=ended))
                if not started:
                    started = True
                    task_status.started(child.pid)
                else:
                    log.info("started %s again (pid %d)", name, child.pid)
                ended = exit_text(await child.wait())
        except (HiveError, OSError) as exc:
            # A first start that fails for a setting of its own ends the harness (it cannot be
            # fixed by waiting); one that another process killed before it was ready is retried.
            if not started and getattr(exc, "signal", None) is None:
                raise
            ended = f"did not start: {exc}"
        delay = backoff.next(delay, trio.current_time() - began)
        now = time.time()
        log.warning("%s %s; starting it again in %s", name, ended, in_seconds(delay))
        report(DaemonHealth("down", now, restarts=restarts, last_exit=ended, restart_at=now + delay))
        await trio.sleep(delay)
        restarts += 1


@attrs.define(eq=False)
class Supervision:
    """A daemon the harness supervises: its health (for ``status``), its outage file
    (``hive._outage``, there only while it is down), and the supervision itself (:meth:`run`)."""

    name: str
    """The daemon as the log names it: ``hive-bash-daemon``, ``subagent daemon``."""
    what: str
    """What the daemon is to the agent: ``bash daemon``, ``subagent daemon``."""
    outage_file: Path
    meanwhile: str
    """What the agent is to do meanwhile, the outage's last words."""
    on_running: Callable[[int], None] = lambda pid: None
    """Called with the pid of each start, once it is ready."""
    health: DaemonHealth | None = None

    async def run(  # noqa: ASYNC128 - supervise() calls task_status.started()
        self, start: Start, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """:func:`supervise` the daemon ``start`` starts, until cancelled; started with its first pid."""
        self.clear()  # one a harness that died left
        try:
            await supervise(self.name, start, self.report, task_status=task_status)
        finally:
            self.clear()

    def report(self, health: DaemonHealth) -> None:
        """The daemon's health changed: kept for ``status``, and said in the outage file."""
        self.health = health
        if health.pid is not None:
            self.on_running(health.pid)
        if health.state == "running":
            self.clear()
            return
        try:
            write_atomic(self.outage_file, self.outage(health).encode() + b"\n", durable=False)
        except OSError as exc:
            log.warning(
                "cannot write %s: %s; the agent's calls will not say the %s is down",
                self.outage_file,
                exc,
                self.what,
            )

    def outage(self, health: DaemonHealth) -> str:
        """What a call to the daemon that is down tells the agent."""
        again = "" if health.restart_at is None else f", next try at {clock(health.restart_at, health.since)}"
        return (
            f"the {self.what} of this agent is down since {clock(health.since, health.since)} "
            f"({health.last_exit}); hive-agent is restarting it{again}. {self.meanwhile}"
        )

    def clear(self) -> None:
        """No outage to say (the daemon runs, or the harness ends)."""
        with contextlib.suppress(FileNotFoundError):
            self.outage_file.unlink()
