"""Stopping bash tasks: a stop request, the deadline, the output cap, and what a task leaves behind.

This module owns every signal the daemon sends to a task. A stop (requested, at the
deadline, or at the output cap) is saved in the task's record before any signal, then
reaches every process of the task, wherever it went: its process group gets SIGINT, the
processes that left the group get it from a worker thread moments later, and whatever of
the task is still alive when the grace ends gets SIGKILL. Where the task has a cgroup of its
own (``held_by: cgroup``, see `hive.bash.procs._cgroups`) the processes are its members, the
SIGKILL is ``cgroup.kill``, and the stop is over once the cgroup is empty; elsewhere
(``held_by: subreaper``) they are found by their ``HIVE_BASH_TASK`` tag and their parents
(see `hive.bash.procs._procs`). The task ends (``stopped``, ``timed_out``) only after that, so a
stopped task has no process left.

A task that ends by itself may leave processes behind (a server started with `setsid`,
say); they are left running, but its output files stay under the cap for as long as they
write them: each interval, the tasks that ended since the last one are looked for in one
scan of ``/proc``, and those with processes left are watched until none is. A leftover of
a stopped task is stopped at once; a leftover of a finished task is stopped once the
output passes the cap. A task's cgroup is removed once it is empty. The notes of the task
say what was signalled and why.

Everything that blocks (``stat``, ``statvfs``, reads of ``/proc``) runs in a worker
thread, batched: one hop per interval for all tasks.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from hive import _proc
from hive._when import counted, in_seconds
from hive.bash._model import StopBegun, StopReason
from hive.bash._settings import TaskSettings
from hive.bash._task import Task
from hive.bash.ends._ledger import Ledger
from hive.bash.procs import _cgroups, _namespaces, _procs
from hive.bash.procs._cap import OutputCap
from hive.bash.procs._finding import TaskFinder

log = logging.getLogger(__name__)

FILLED_UP = "the disk holding {} filled up while it ran; its output may be cut short"


KILL_SETTLE = 5.0
"""How long a stop waits for the processes of a cgroup to die after ``cgroup.kill``."""


def _pids(pids: Sequence[int]) -> str:
    shown = ", ".join(str(p) for p in pids[:10])
    return shown + (f" and {len(pids) - 10} more" if len(pids) > 10 else "")


def _signal_members(
    cgroup: Path, marks: _procs.TaskMarks, sig: signal.Signals
) -> tuple[list[int], list[int]]:
    """Send ``sig`` to the task's processes outside its group (the group had it): those in its
    cgroup, and those its marks find that have left the cgroup. The pids signalled, and the
    pids of the processes found outside the cgroup."""
    left = _left_cgroup(cgroup, marks)
    inside = _procs.proc_infos(_cgroups.members(cgroup))
    procs = [p for p in (*inside, *left) if p.pgid != marks.pgid]
    return _procs.signal_processes(procs, sig), [p.pid for p in left]


def _left_cgroup(cgroup: Path, marks: _procs.TaskMarks) -> list[_procs.ProcInfo]:
    """The task's processes, found by its marks, that are not in its cgroup (blocking). The
    cgroup is read after the scan, so a process forked into it meanwhile is not counted; one that
    ended meanwhile (the group's SIGINT comes first) is gone from the cgroup too, and is not
    counted either: only a process still alive, as the scan found it, left."""
    found = _procs.task_processes(marks)
    inside = set(_cgroups.members(cgroup))
    return [p for p in found if p.pid not in inside and _still_alive(p)]


def _still_alive(proc: _procs.ProcInfo) -> bool:
    now = _proc.read_stat(proc.pid)
    return now is not None and not now.zombie and now.start_time == proc.start_time


@attrs.frozen
class _Survey:
    """What one interval's worker hop found."""

    disk_full: bool
    sizes: dict[str, int]
    """Serial -> bytes of stdout and stderr together."""
    start_times: dict[str, int | None]
    namespaces: dict[str, tuple[int, int] | None]
    """Serial -> the cgroup namespace of a running task's wrapper, where it is not held yet."""
    leftovers: dict[str, list[_procs.ProcInfo]]
    """Serial -> the live processes of an ended task."""


@attrs.define(eq=False)
class Stopper:
    """The stopping side of a :class:`~hive.bash._task_manager.TaskManager`: it changes and saves the
    records of the tasks it stops through the ledger, and sees the manager's tasks by id."""

    ledger: Ledger
    settings: TaskSettings
    tasks: Mapping[str, Task]
    clock: Callable[[], float]
    nursery: trio.Nursery | None = None
    """Where the stops of what ended tasks left behind run: the task manager's, once it serves."""
    _ended: dict[str, Task] = attrs.field(factory=dict)
    """Ended tasks (by serial) that may still have processes: looked for at the next survey."""
    _cleaning: set[str] = attrs.field(factory=set)
    finder: TaskFinder = attrs.field(init=False)
    cap: OutputCap = attrs.field(init=False)
    _graces: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    """Serial -> the grace of a stop under way."""

    def __attrs_post_init__(self) -> None:
        self.finder = TaskFinder(self.settings)
        self.cap = OutputCap(self)

    @property
    def stopping(self) -> bool:
        """Whether the daemon is stopping (or not serving yet): it signals nothing then."""
        return self.nursery is None or self.nursery.cancel_scope.cancel_called

    def soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run a stop's signals in the task manager's nursery (the daemon is serving)."""
        assert self.nursery is not None
        self.nursery.start_soon(fn, *args)

    def lingering(self, serial: str) -> bool:
        """Whether the ended task may still have processes looked for or being stopped."""
        return serial in self._ended or serial in self._cleaning

    # -- beginning a stop -----------------------------------------------------------------------

    def request(self, task: Task) -> bool:
        """Begin stopping a running task; False if it is not running or already stopping."""
        return self.begin(task, StopReason.REQUESTED)

    def begin(self, task: Task, reason: StopReason) -> bool:
        """Begin stopping a running task: the stop is recorded now, and its supervisor saves it,
        then signals (see `finish`)."""
        if (
            task.final
            or task.exited.is_set()
            or task.record.stop_reason is not None
            or task.supervisor is None
        ):
            return False
        # Recorded before anything awaits, so a second stop (a deadline during a requested
        # stop, say) finds this one under way and leaves it be.
        self.ledger.change(task, StopBegun(reason), stop_started_at=self.clock())
        task.supervisor.start_soon(self.finish, task)
        return True

    async def deadline(self, task: Task, scope: trio.CancelScope) -> None:
        """Stop the task when its ``timeout_secs`` are up, unless ``scope`` is cancelled first."""
        with scope:
            started = task.record.started_at or task.record.created_at
            await trio.sleep(max(0.0, started + (task.record.timeout_secs or 0.0) - self.clock()))
            self.begin(task, StopReason.TIMEOUT)

    # -- finishing a stop -----------------------------------------------------------------------

    async def finish(self, task: Task) -> None:
        """Save the stop, then SIGINT to the task's group and to its processes outside the group,
        then SIGKILL to whatever of the task is still alive when the grace ends.

        Saved first: a daemon that dies after a signal leaves a record saying the task is being
        stopped, so the next start finishes the stop and the task ends ``stopped`` (or
        ``timed_out``), not ``done`` with the status the signal gave it. This also runs for a
        stop that a previous daemon began (see `_supervise`): the group gets SIGINT again.
        """
        await self.ledger.save(task)
        pgid = task.record.pid
        assert pgid is not None and task.record.stop_started_at is not None
        await self.finder.learn(task)  # before the wrapper can end
        await self.finder.catch_adopted(task)
        # Once the wrapper is reaped its pid may be anyone's: the scan below finds what is left.
        if not task.exited.is_set() and _proc.signal_group(pgid, signal.SIGINT):
            self.signalled(task, "SIGINT")
        marks = self.finder.marks(task)
        cgroup = self._cgroup(task)
        if cgroup is not None:
            escaped, left = await trio.to_thread.run_sync(_signal_members, cgroup, marks, signal.SIGINT)
            self._left_cgroup(task, left)
        else:
            escaped = await trio.to_thread.run_sync(_procs.signal_escaped, marks, signal.SIGINT)
        if escaped:
            self.signalled(task, "SIGINT")
            self.ledger.note(
                task,
                f"SIGINT also went to {len(escaped)} of its processes outside its process group "
                f"(pids {_pids(escaped)})",
            )
        grace_ends = task.record.stop_started_at + self.settings.kill_grace
        all_gone = False
        with self._grace(task, max(0.0, grace_ends - self.clock())):
            await task.exited.wait()
            # The wrapper is gone but some of the task may linger: it gets the rest of the grace.
            if cgroup is not None:
                await _cgroups.wait_empty(cgroup)
                outside = await trio.to_thread.run_sync(_left_cgroup, cgroup, marks)
            else:
                outside = await trio.to_thread.run_sync(_procs.task_processes, marks)
            await _procs.wait_gone(outside)
            all_gone = not outside
        if not all_gone:
            await self.kill(task, "still alive when the grace ended")
        await self._unattributed(task)

    def _left_cgroup(self, task: Task, left: Sequence[int]) -> None:
        if left:
            self.ledger.note(
                task,
                f"{len(left)} of its processes had left its cgroup (pids {_pids(left)}); "
                "the stop reached them where they went",
            )

    async def _unattributed(self, task: Task) -> None:
        """Say plainly what may have escaped a stopped task: the processes the daemon (the
        subreaper) adopted since the task started that carry no mark of any task (no tag, no
        task's cgroup namespace, not in a task's cgroup): a cleared environment that also left
        its cgroup where tasks get no namespace, or its namespace too (``nsenter``, as root).
        They cannot be told as this task's, and are not stopped."""
        tasks = (*self.tasks.values(), *self._ended.values())
        cgroups = {cgroup for t in tasks if (cgroup := self._cgroup(t)) is not None}
        orphans = await self.finder.unmarked_orphans(task, cgroups)
        if orphans:
            self.ledger.note(
                task,
                f"{counted(len(orphans), 'process', 'processes')} with no mark of any task "
                f"(pids {_pids(orphans)}) were orphaned to the daemon since it started: they may "
                "have escaped it, and were not stopped",
            )

    @contextlib.contextmanager
    def _grace(self, task: Task, seconds: float) -> Iterator[trio.CancelScope]:
        """The grace between SIGINT and SIGKILL."""
        serial = task.record.serial
        with trio.move_on_after(seconds) as scope:
            self._graces[serial] = scope
            try:
                yield scope
            finally:
                del self._graces[serial]

    def _cgroup(self, task: Task) -> Path | None:
        return self.settings.cgroup_of(task.record)

    async def kill(self, task: Task, why: str, *, by_group: bool = True) -> None:
        cgroup = self._cgroup(task)
        if cgroup is not None:
            await self._kill_cgroup(task, cgroup, why)
            # What is left has left the cgroup: its marks find it.
            by_group = False
        marks = self.finder.marks(task, by_group=by_group)
        group, killed = await trio.to_thread.run_sync(_procs.kill_task, marks)
        if group or killed:
            self.signalled(task, "SIGKILL")
        if killed:
            self.ledger.note(
                task, f"SIGKILL went to {len(killed)} of its processes {why} (pids {_pids(killed)})"
            )

    async def _kill_cgroup(self, task: Task, cgroup: Path, why: str) -> None:
        """SIGKILL to every process in the task's cgroup at once, then wait (a while: a process
        in uninterruptible sleep dies only when it wakes) until the cgroup is empty."""
        killed = await trio.to_thread.run_sync(_cgroups.kill_all, cgroup)
        if not killed:
            return
        self.signalled(task, "SIGKILL")
        self.ledger.note(task, f"SIGKILL went to {len(killed)} of its processes {why} (pids {_pids(killed)})")
        with trio.move_on_after(KILL_SETTLE) as waited:
            await _cgroups.wait_empty(cgroup)
        if waited.cancelled_caught:
            left = await trio.to_thread.run_sync(_cgroups.members, cgroup)
            self.ledger.note(
                task,
                f"still dying {in_seconds(KILL_SETTLE)} after SIGKILL: {counted(len(left), 'process', 'processes')} "
                f"(pids {_pids(left)})",
            )

    def signalled(self, task: Task, name: str) -> None:
        if name not in task.record.signals:
            self.ledger.change(task, signals=(*task.record.signals, name))

    # -- after the end --------------------------------------------------------------------------

    def ended(self, task: Task) -> None:
        """The task's wrapper has exited: look for processes it left behind at the next survey
        (its output is checked as it grows until none is left)."""
        self._ended[task.record.serial] = task
        self.cap.watch(task)

    def watching(self, task: Task) -> bool:
        """Whether processes of this ended task may still be alive (a stop under way, or
        leftovers looked for or being stopped): its files are still written."""
        serial = task.record.serial
        return serial in self._ended or serial in self._cleaning or serial in self._graces

    async def survey(self) -> None:
        """The per-interval check: every running task's output against the cap and its disk for
        space, and the processes that ended tasks left behind. One worker hop for all of it."""
        store = self.ledger.store
        running = [t for t in self.tasks.values() if t.supervisor is not None and not t.exited.is_set()]
        ended = list(self._ended.values())
        measured = {t.record.serial: t for t in (*running, *ended, *self.cap.watched)}
        # Everything the thread needs is read here, on the loop.
        measure = [(serial, t.id) for serial, t in measured.items()]
        unstarted = [(t.record.serial, t.record.pid) for t in running if t.record.pid_start_time is None]
        unmarked = [(t.record.serial, pid) for t in running if (pid := self.finder.unlearned(t)) is not None]
        # By cgroup, and by tag and namespace: an ended task's wrapper is reaped, and its pid
        # (the group's id) may be anyone's by now.
        cgroups = {t.record.serial: c for t in ended if (c := self._cgroup(t)) is not None}
        marks = {t.record.serial: self.finder.marks(t, by_group=False) for t in ended}
        # A cgroup is removed once empty, unless a stop (which waits on it) is still under way.
        removable = {serial for serial in cgroups if serial not in self._graces}
        reap = self.settings.reap_orphans

        def work() -> _Survey:
            leftovers = _procs.scan_tasks(marks, reap=reap)
            for serial, cgroup in cgroups.items():
                inside = _procs.proc_infos(_cgroups.members(cgroup))
                if not inside and serial in removable:
                    _cgroups.remove(cgroup)
                found = {p.pid: p for p in (*leftovers.get(serial, ()), *inside)}
                leftovers[serial] = sorted(found.values(), key=lambda p: p.pid)
            return _Survey(
                disk_full=not store.has_space(),
                sizes={serial: store.output_size(task_id) for serial, task_id in measure},
                # Off the spawn path: reading /proc/<pid>/stat can wait on the child's exec.
                start_times={s: None if pid is None else _proc.start_time(pid) for s, pid in unstarted},
                namespaces={s: _namespaces.hold_cgroup_namespace(pid) for s, pid in unmarked},
                leftovers=leftovers,
            )

        survey = await trio.to_thread.run_sync(work)
        for task in running:
            self._check_running(task, survey)
        for task in measured.values():
            self.cap.check(task, survey.sizes.get(task.record.serial, 0))
        for task in ended:
            self._check_ended(task, survey)

    def _check_running(self, task: Task, survey: _Survey) -> None:
        serial = task.record.serial
        start = survey.start_times.get(serial)
        if start is not None and task.record.pid_start_time is None:
            self.ledger.change(task, pid_start_time=start)
        if serial in survey.namespaces:
            self.finder.learned(task, survey.namespaces[serial])
        if survey.disk_full:
            self.ledger.note(task, FILLED_UP.format(self.ledger.store.tasks_dir))

    def _check_ended(self, task: Task, survey: _Survey) -> None:
        serial = task.record.serial
        left = survey.leftovers.get(serial, [])
        if not left:
            if serial not in self._graces:  # else looked at again once the stop is over
                self._ended.pop(serial, None)
                self.finder.forget(task)
                self.cap.unwatch(serial)
            return
        if serial in self._cleaning:
            return
        pids = [p.pid for p in left]
        cap = self.settings.max_output_bytes
        size = survey.sizes.get(serial, 0)
        if task.record.stop_reason is not None:
            why = f"after it was {task.record.state.value}, {len(left)} of its processes were still running"
        elif size > cap and self.tasks.get(task.id) is task:
            why = (
                f"after it ended, {len(left)} of its processes kept writing: its output reached {size} "
                f"bytes, over the cap of {cap} bytes"
            )
        else:
            return
        if self.stopping:
            return
        self.ledger.note(task, f"{why} (pids {_pids(pids)}); they were stopped")
        self._cleaning.add(serial)
        self.soon(self._stop_leftovers, task, left)

    async def _stop_leftovers(self, task: Task, left: list[_procs.ProcInfo]) -> None:
        """SIGINT to what an ended task left behind, SIGKILL to what is left of it after the grace."""
        cgroup = self._cgroup(task)
        try:
            await trio.to_thread.run_sync(_procs.signal_processes, left, signal.SIGINT)
            with self._grace(task, self.settings.kill_grace):
                if cgroup is not None:
                    await _cgroups.wait_empty(cgroup)
                await _procs.wait_gone(left)
            await self.kill(task, "left behind and still alive when the grace ended", by_group=False)
        finally:
            self._cleaning.discard(task.record.serial)
