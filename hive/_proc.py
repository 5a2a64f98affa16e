"""Processes by their pid: telling one from a later one with the same pid, awaiting an exit on
a pidfd, and SIGINT to the process group one leads.

A pid names a process only until the process is reaped; then another may get it. A process
this one did not start (an agent or a daemon an earlier program left) is *adopted* by its pid
and the start time recorded when it was first seen (field 22 of ``/proc/<pid>/stat``): the
pidfd is opened first and the start time checked after, so the pidfd holds the very process
that was recorded. A child this process started and has not reaped needs no such check.

A process group is signalled only while its leader is known not to have been reaped (through
its pidfd): a group id whose leader is gone may be another process's pid by now. A
``GroupLeader`` sends its group SIGINT at most once (a second SIGINT makes some agents quit
at once, without their own end of the turn).

Standard library and Trio only, and Trio is imported only by what awaits: ``hive run`` signals
an agent it prestarted before it has imported Trio. What reads ``/proc`` is blocking but brief
(one small file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

    from hive._spawn import Process


@dataclasses.dataclass(frozen=True, slots=True)
class ProcStat:
    """What hive reads of a process's ``/proc/<pid>/stat`` line."""

    pid: int
    comm: bytes
    """The command name, as the kernel keeps it (at most 15 bytes, any but NUL)."""
    state: bytes
    """One letter: ``R``, ``S``, ..., ``Z`` for a zombie (exited, not reaped)."""
    ppid: int
    pgid: int
    start_time: int
    """Clock ticks from boot to the process's start: with the pid, it names one process."""

    @property
    def zombie(self) -> bool:
        return self.state == b"Z"


def parse_stat(line: bytes) -> ProcStat:
    """Parse one ``/proc/<pid>/stat`` line; ValueError if it is not one.

    The command name (field 2) stands in parentheses and may itself hold spaces, parentheses
    and newlines, so it ends at the *last* ``)``: no later field can hold one.
    """
    opening = line.find(b" (")
    closing = line.rfind(b")")
    if opening < 0 or closing < opening:
        raise ValueError(f"not a /proc/<pid>/stat line: {line[:80]!r}")
    fields = line[closing + 1 :].split()
    if len(fields) < 20:
        raise ValueError(f"a /proc/<pid>/stat line with {len(fields) + 2} fields, not 22 or more")
    return ProcStat(
        pid=int(line[:opening]),
        comm=line[opening + 2 : closing],
        state=fields[0],
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        start_time=int(fields[19]),
    )


def listed_pids() -> list[str]:
    """The pids ``/proc`` lists now (its numeric entries, as they are named there)."""
    with os.scandir("/proc") as entries:
        return [entry.name for entry in entries if entry.name.isdigit()]


def read_stat(pid: int | str) -> ProcStat | None:
    """Process ``pid`` as ``/proc`` shows it now (a zombie too); None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            line = f.read()
    except OSError:
        return None
    return parse_stat(line)


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (see `ProcStat.start_time`), or None if there is none.

    A zombie keeps its start time until it is reaped, so a child that has just exited has one.
    """
    stat = read_stat(pid)
    return None if stat is None else stat.start_time


def is_same_process(pid: int, recorded_start: int | None) -> bool:
    """Whether ``pid`` is still the live (not zombie) process that started at ``recorded_start``."""
    stat = read_stat(pid)
    return stat is not None and not stat.zombie and stat.start_time == recorded_start


def signal_group(pgid: int, signum: int = signal.SIGINT) -> bool:
    """Send ``signum`` to the process group ``pgid``; False if no process is left in it.

    The caller knows ``pgid`` is still the group it means: its leader is a child not yet
    reaped, or a `Pidfd` says the leader lives (`Pidfd.signal_group`).
    """
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    return True


class Pidfd:
    """A pidfd: a handle on one process, which no later process with its pid can be taken for.

    Readable once the process has exited (a zombie counts), which `wait` awaits and `exited`
    tells without waiting; closed by `close`, after which the process counts as exited.
    """

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self._fd = fd

    @classmethod
    def of_child(cls, pid: int) -> Pidfd:
        """The pidfd of a child of this process that is not reaped yet (so its pid is its own)."""
        return cls(pid, os.pidfd_open(pid))

    @classmethod
    def adopt(cls, pid: int, recorded_start: int | None) -> Pidfd | None:
        """Process ``pid`` if it is still the one that started at ``recorded_start``; None if it
        is gone, its pid is another process's now, or no start time was recorded.

        A zombie of that process is adopted too: it has exited, and `wait` returns at once.
        """
        if recorded_start is None:
            return None
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return None
        # Checked after the pidfd is open: the pidfd now holds the process the start time is read of.
        if start_time(pid) != recorded_start:
            os.close(fd)
            return None
        return cls(pid, fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def exited(self) -> bool:
        """Whether the process has exited (or this pidfd is closed), without waiting."""
        if self._fd < 0:
            return True
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(0))

    def send_signal(self, signum: int) -> bool:
        """Send ``signum`` to the process itself; False if it has been reaped (or this is closed).

        Signal 0 sends nothing and tells whether it is still there (a zombie is).
        """
        if self._fd < 0:
            return False
        try:
            signal.pidfd_send_signal(self._fd, signum)
        except ProcessLookupError:
            return False
        return True

    def signal_group(self, signum: int = signal.SIGINT) -> bool:
        """Send ``signum`` to the process group this process leads; False if it is gone.

        The leader is checked through the pidfd first: while it is not reaped, its pid, and so
        its group id, cannot be another's.
        """
        return self.send_signal(0) and signal_group(self.pid, signum)

    async def wait(self) -> None:
        """Return once the process has exited (at once if this pidfd is closed, or is closed meanwhile)."""
        import trio

        if self._fd < 0:
            await trio.lowlevel.checkpoint()
            return
        with contextlib.suppress(trio.ClosedResourceError):
            await trio.lowlevel.wait_readable(self._fd)

    def close(self) -> None:
        """Close the pidfd (a task waiting on it wakes up); closing twice does nothing."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        trio = sys.modules.get("trio")  # not imported: no Trio task can be waiting on it
        if trio is not None and trio.lowlevel.in_trio_run():
            trio.lowlevel.notify_closing(fd)
        os.close(fd)

    def __enter__(self) -> Pidfd:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class GroupLeader:
    """A process that leads its own process group (started in a new session), stopped by SIGINT
    to that group, sent at most once."""

    def __init__(self, pidfd: Pidfd, *, signalled: bool = False) -> None:
        self.pidfd = pidfd
        self.signalled = signalled
        """Whether its group has been sent SIGINT (by this holder, or before it was adopted)."""

    @property
    def pid(self) -> int:
        return self.pidfd.pid

    def interrupt(self) -> bool:
        """SIGINT to its process group, once; False if it was sent before or the leader is gone
        (reaped: a zombie leader still holds its group's id, and the group may still have members)."""
        if self.signalled or not self.pidfd.signal_group(signal.SIGINT):
            return False
        self.signalled = True
        return True


class ChildExit:
    """The exit of a child this process started (`hive._spawn.Process`): awaited on its pidfd,
    then reaped. One task waits at a time (others queue behind it)."""

    def __init__(self, popen: Process) -> None:
        import trio

        self.popen = popen
        self.pidfd = (
            Pidfd.of_child(popen.pid)
            if isinstance(popen, subprocess.Popen)
            else Pidfd(popen.pid, popen.pidfd)
        )
        self._waiting: trio.Lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        """Its exit status, or None while it runs (reaping it if it has just exited)."""
        status = self.popen.poll()
        if status is not None and not self._waiting.locked():
            self.pidfd.close()
        return status

    async def wait(self) -> int:
        """Wait for the child to exit and reap it; its exit status."""
        async with self._waiting:
            if self.popen.poll() is None:
                await self.pidfd.wait()
            self.pidfd.close()
            return self.popen.wait()


async def wait_exit(pid: int, recorded_start: int | None) -> bool:
    """Wait for process ``pid``, the one that started at ``recorded_start``, to exit; False at
    once if it was gone already (or its pid is another process's now, or no start was recorded)."""
    pidfd = Pidfd.adopt(pid, recorded_start)
    if pidfd is None:
        return False
    with pidfd:
        await pidfd.wait()
    return True
