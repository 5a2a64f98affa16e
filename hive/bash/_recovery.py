"""Recovery: what a starting daemon makes of what the previous one left behind.

It owns the daemon's start-up pass, before the socket answers: every task record is loaded
and its task re-adopted (still running: watched again, with its deadline and start time) or
settled (ended while the daemon was down: its exit status is read from ``<id>.exit``, and its
end, which decides whether it timed out, is when its wrapper wrote that; gone without one:
``interrupted``) or put back in line (it waited for a place to run, see
`hive.bash._line`); a live wrapper with no record is adopted by its mark; a
task's files with no record (``<id>.cmd``, ``.out``, ``.err``, ``.exit``) become a record
again; and every end the agent has not been told is owed once more and its wake resent.
The processes that ended tasks left behind are found in their task's cgroup (or by their
tag, for a task the subreaper held) and watched by the stopper (see `hive.bash.procs._stopping`),
as they were before the restart; a task cgroup that no task owns any more is emptied and
removed. Which ends are owed again is the owed-end model's (`hive.bash.ends._owed.plan_recovery`):
a loose end is always written before the final record it goes with, so a crash between the two
leaves the end owed, never forgotten. Each wake carries its end's id (``<id>:<serial>``), so a
receiver can drop the repeat that a crash during recovery may cause.

What survives what:

- **A daemon SIGKILL (or any crash of the daemon alone): everything.** A task's record (with
  its timeout and start time) and its loose end are written before its process starts, a
  refused write refuses the task, and tasks do not depend on the daemon (their output and
  exit status go to files they write themselves). Writes go to the page cache, which
  outlives the process that made them.
- **A power loss: what was made durable.** A `run` is answered `task started` only once its
  record and loose end are durable: fsynced, and their directories too (the syncs of the
  tasks that start together are made together, see `hive.bash.files._durable`; an answer that
  tells the end needs none); a task acknowledged ``pending`` has its command durable too, and
  its record is made durable out of the line before it runs, so that a cut neither runs it
  twice nor leaves it in line with no command. The state directories are fsynced into their
  parents as they are made. The final record, and the loose end of an end still owed (rewritten then with its
  wake), are made durable at the next interval after the end, all of an interval's together,
  and at an orderly stop (the loose end saved at the start owes the end meanwhile: see
  `Ledger.sync_ends`), as are the removals of the loose ends of ends told (their directory,
  after the records': a removal a power loss undoes is an end told twice). The tasks
  themselves die with the machine and come back ``interrupted``: their wrapper never wrote
  an exit status.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

import trio

from hive import _proc
from hive._when import counted
from hive.bash._model import Exited, HeldBy, Spawned, StopBegun, StopReason, TaskState, Vanished
from hive.bash._settings import TaskSettings
from hive.bash._task import Task
from hive.bash.ends._ledger import Ledger
from hive.bash.ends._owed import Place, plan_recovery
from hive.bash.ends._watch import saved_watch
from hive.bash.files._records import LooseEnd, TaskRecord
from hive.bash.files._store import serial_from_files
from hive.bash.procs import _cgroups, _procs
from hive.bash.procs._stopping import Stopper

log = logging.getLogger(__name__)

WaitExit = Callable[[], Awaitable[int | None]]


class Manager(Protocol):
    """What recovery needs of the task manager: its ledger, settings, stopper and clock, the
    tasks it knows, and a way to know one more and to watch it."""

    @property
    def ledger(self) -> Ledger: ...
    @property
    def settings(self) -> TaskSettings: ...
    @property
    def stopper(self) -> Stopper: ...
    @property
    def tasks(self) -> Mapping[str, Task]: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    def register(self, task: Task) -> None: ...
    def supervise_soon(self, task: Task, wait_exit: WaitExit) -> None: ...
    def requeue(self, task: Task) -> None: ...


async def recover(manager: Manager) -> None:
    """Pick up where the previous daemon left off: re-adopt live tasks, settle dead ones,
    and owe the agent every end it has not been told."""
    ledger = manager.ledger
    records, found, unreadable = await ledger.load()
    plan = plan_recovery(((r.id, r.serial) for r in records), found)
    loose_end_of = found.__getitem__

    # First, before anything is written at the latest path of its id: the loose end there of
    # an earlier run whose name a later one took as the previous daemon died.
    for superseded in plan.superseded:
        await _name_taken(ledger, loose_end_of(superseded), Place.LATEST)
    for record in records:
        task = Task(record)
        manager.register(task)
        if record.state.final:
            task.ended.set()
            task.exited.set()
        own = plan.runs[task.key]
        await ledger.recovered(
            task, None if own is None else loose_end_of(own), None if own is None else own.at
        )
        if record.state is TaskState.PENDING and record.queued is not None:
            # It waited for a place to run, and its record was saved out of the line before
            # any process of it could start: it never ran, and waits again, in its place.
            manager.requeue(task)
        elif not record.state.final:
            # The previous daemon died before this task's end was recorded, so the agent has
            # not been told it (or was told it inline moments before: a wake then is a repeat).
            await _resume(manager, task)
    orphans = {task_id: loose_end_of(orphan) for task_id, orphan in plan.orphans.items()}
    await _adopt_unrecorded(manager, {r.serial for r in records}, orphans)
    await _recover_from_files(manager, orphans, unreadable)
    await _watch_leftovers(manager)
    for orphan in orphans.values():
        log.warning("loose end for %s has no task record; sending what it holds", orphan.task_id)
        await ledger.unclaimed(
            orphan, Place.LATEST, superseded=False, unknown="its record was lost; its end is unknown"
        )
    for earlier in plan.earlier:
        await _name_taken(ledger, loose_end_of(earlier), Place.OWN)
    # Before the daemon answers, each loose end of an end it settled holds its wake.
    await ledger.sync_ends(manager.tasks)


async def _name_taken(ledger: Ledger, loose_end: LooseEnd, at: Place) -> None:
    """Owe the end of a run whose name a later run took, as its loose end at ``at`` tells it."""
    await ledger.unclaimed(
        loose_end, at, superseded=True, unknown="a later task took its name; its end is unknown"
    )


async def _adopt_unrecorded(manager: Manager, known: set[str], orphans: dict[str, LooseEnd]) -> None:
    """Adopt live tasks of ours that have no record (it was lost, or written by a daemon that
    saved records only after the start)."""
    ledger = manager.ledger
    found_all = await trio.to_thread.run_sync(_procs.find_wrappers, ledger.store.tasks_dir)
    for found in found_all:
        current = manager.tasks.get(found.task_id)
        if found.serial in known or (current is not None and not current.final):
            continue
        log.warning("adopting task %s (pid %d), which has no record", found.task_id, found.pid)
        loose_end = orphans.get(found.task_id)
        own = None
        if loose_end is not None:
            del orphans[found.task_id]
            if loose_end.serial == found.serial:
                own = loose_end
            else:
                # Another run's end at the latest path of the id this one holds: kept apart.
                await ledger.unclaimed(
                    loose_end,
                    Place.LATEST,
                    superseded=True,
                    unknown="its record was lost; its end is unknown",
                )
        created = _mtime(ledger.store.cmd_path(found.task_id)) or manager.clock()
        record = TaskRecord(
            id=found.task_id,
            serial=found.serial,
            cmd=found.cmd,
            cwd=found.cwd,
            created_at=created,
            state=TaskState.RUNNING,
            started_at=created,
            pid=found.pid,
            pid_start_time=found.start_time,
            notes=("its record was lost while the daemon was down; it was found running",),
        )
        task = Task(record, record_dirty=True)
        manager.register(task)
        await ledger.recovered(task, own, None if own is None else Place.LATEST)
        await _resume(manager, task)


async def _recover_from_files(manager: Manager, orphans: dict[str, LooseEnd], unreadable: list[str]) -> None:
    """A task whose files are here but whose record is not (lost, never saved by a daemon that
    died as it started the task), or whose record is ``unreadable`` (a crash or a power cut
    left it empty or torn), is recovered from its files: its command from ``<id>.cmd``, its
    end from ``<id>.exit`` (``interrupted`` where there is none). Nobody was told its end: it
    is owed."""
    ledger = manager.ledger
    store = ledger.store
    ids = sorted({*await trio.to_thread.run_sync(store.current_task_ids), *unreadable})
    for task_id in ids:
        if task_id in manager.tasks:
            continue
        loose_end = orphans.pop(task_id, None)
        cmd = await trio.to_thread.run_sync(store.read_cmd, task_id)
        created = _mtime(store.cmd_path(task_id)) or manager.clock()
        log.warning("recovering task %s from its files: its record is missing or unreadable", task_id)
        # A watched run's state was made durable with its record as it started: it keeps the
        # run's serial (its match wakes' ids) and its pattern, which a record a cut left empty lost.
        watched = await trio.to_thread.run_sync(
            saved_watch, store, task_id, None if loose_end is None else loose_end.serial
        )
        if loose_end is not None:
            serial = loose_end.serial
        elif watched is not None:
            serial = watched.serial
        else:
            serial = await trio.to_thread.run_sync(serial_from_files, store.task_paths(task_id)[1:], task_id)
        record = TaskRecord(
            id=task_id,
            serial=serial,
            cmd=cmd if cmd is not None else f"(unknown: {task_id}.cmd could not be read)",
            cwd=str(manager.settings.workdir),
            created_at=created,
            notes=("its record was lost while the daemon was down; it was recovered from its files",),
            notify_on=None if watched is None else watched.notify_on,
            notify_max=None if watched is None else watched.notify_max,
        )
        task = Task(record, record_dirty=True)
        manager.register(task)
        await ledger.recovered(task, loose_end, None if loose_end is None else Place.LATEST)
        await _resume(manager, task)


async def _watch_leftovers(manager: Manager) -> None:
    """Hand the ended tasks whose processes outlived them (and the previous daemon) to the
    stopper, as an end seen by this daemon is: a stopped task's leftovers are stopped, and
    the output cap holds on the files of a finished one's for as long as they write them.

    Those held by a cgroup are found in it; the others by their tag, in one scan of ``/proc``
    (the wrappers are gone: no group to go by). A task cgroup left by the previous daemon that
    no task of this state directory owns any more is emptied (SIGKILL) and removed; an empty
    one of an ended task is removed.
    """
    settings = manager.settings
    parent = settings.cgroup_parent
    if parent is not None:
        serials = {t.record.serial: t for t in manager.tasks.values()}
        for name in await trio.to_thread.run_sync(_cgroups.leftovers, parent):
            task = serials.get(name)
            cgroup = parent / name
            if task is not None:
                if task.record.held_by is not HeldBy.CGROUP:
                    # Its record was lost (or written by a daemon that did not say): the
                    # cgroup named by its serial holds it.
                    manager.ledger.change(task, held_by=HeldBy.CGROUP)
                if task.final:
                    if await trio.to_thread.run_sync(_cgroups.populated, cgroup):
                        log.info(
                            "task %s ended before this daemon started and left processes behind", task.id
                        )
                        manager.stopper.ended(task)
                    else:
                        await trio.to_thread.run_sync(_cgroups.remove, cgroup)
                continue
            killed = await trio.to_thread.run_sync(_cgroups.kill_all, cgroup)
            if killed:
                log.warning(
                    "killed %s in cgroup %s, which no known task owns",
                    counted(len(killed), "process", "processes"),
                    cgroup,
                )
                with trio.move_on_after(5):
                    await _cgroups.wait_empty(cgroup)
            await trio.to_thread.run_sync(_cgroups.remove, cgroup)
    ended = {
        _procs.task_tag(t.id, t.record.serial): t
        for t in manager.tasks.values()
        if t.final and settings.cgroup_of(t.record) is None
    }
    if not ended:
        return
    procs = await trio.to_thread.run_sync(_procs.snapshot)
    for tag in sorted({p.tag for p in procs if p.tag is not None and not p.zombie} & ended.keys()):
        task = ended[tag]
        log.info("task %s ended before this daemon started and left processes behind", task.id)
        manager.stopper.ended(task)


async def _resume(manager: Manager, task: Task) -> None:
    """Watch a task that may still run; settle it if it does not."""
    ledger = manager.ledger
    store = ledger.store
    record = task.record
    pid = record.pid
    if pid is None or record.pid_start_time is None:
        # Saved before its process started (or before its start time was read): the
        # wrapper's mark tells whether it lives.
        found = await trio.to_thread.run_sync(_procs.find_wrapper, _procs.wrapper_mark(record.serial))
        if found is not None:
            pid, start = found
            ledger.change(task, Spawned(), pid=pid, pid_start_time=start)
            if task.record.started_at is None:
                ledger.change(task, started_at=record.created_at)
    if pid is not None and _proc.is_same_process(pid, task.record.pid_start_time):
        log.info("re-adopting task %s (pid %d)", task.id, pid)
        await ledger.save(task)
        manager.supervise_soon(task, _adopted_exit(pid, task.record.pid_start_time))
        return
    written = store.read_exit_status(task.id)
    # Past the cap while no daemon watched it: the file size limit ended its writers, and its
    # wrapper shell too if it said so on stderr (SIGXFSZ, then no exit status).
    size = await trio.to_thread.run_sync(store.output_size, task.id)
    capped = size > manager.settings.max_output_bytes
    if capped:
        if task.record.state is TaskState.PENDING:
            ledger.change(task, Spawned(), started_at=task.record.started_at or task.record.created_at)
        manager.stopper.cap.ended_past(task, size, "it passed the cap while the daemon was down")
    if written is not None:
        if task.record.state is TaskState.PENDING:  # started, but its record not saved since
            ledger.change(task, Spawned(), started_at=task.record.started_at or task.record.created_at)
        # When it ended, not when this daemon learnt it: the timeout's verdict depends on it.
        ended_at = written.written_at
        timeout = task.record.timeout_secs
        started = task.record.started_at or task.record.created_at
        if timeout is not None and ended_at >= started + timeout:
            # Its deadline passed before it ended: it was stopped at the deadline by a daemon
            # that died before saving so, or it outran a deadline nobody was there to enforce.
            ledger.change(task, StopBegun(StopReason.TIMEOUT), stop_started_at=started + timeout)
        ledger.change(task, Exited(), exit_code=written.code, ended_at=ended_at)
        ledger.note(task, "it ended while the daemon was down; its exit status was recovered")
    elif capped:
        ledger.change(task, Exited(), ended_at=manager.clock())
        ledger.note(
            task,
            "it left no exit status: its wrapper shell ended without writing one, as a shell that "
            "meets the file size limit does (SIGXFSZ)",
        )
    else:
        ledger.change(task, Vanished(), ended_at=manager.clock())
        ledger.note(
            task,
            "it was gone when the daemon started and left no exit status: its wrapper shell ended "
            "before writing one (killed, or the machine went down)",
        )
    task.ended.set()
    task.exited.set()
    # Its wake, then the final record (the ledger saves it only once a loose end owes the end:
    # a crash between the two leaves the end owed, where the other order would forget it).
    await ledger.wake_of(task)
    await ledger.end(task)
    await ledger.save(task)


def _adopted_exit(pid: int, start: int | None) -> Callable[[], Awaitable[int | None]]:
    async def wait() -> int | None:
        await _proc.wait_exit(pid, start)
        return None

    return wait


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
