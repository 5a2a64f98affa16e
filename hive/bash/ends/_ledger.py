"""The ledger: what the daemon keeps on disk of its tasks, and the ends it owes the agent.

It owns every write of a task record and of a loose end (through :class:`TaskStore`), and the
owed-end model (`hive.bash.ends._owed`) that decides them: the task manager, the stopper and recovery
tell it what happened (a task began, ended, was held, answered, acknowledged, found again by a
restarted daemon), and it carries out what the model answers: loose ends saved, set aside and
removed, wakes handed to the courier and taken back.

The records themselves are `hive.bash.files._task_records`'s; the loose-end writes of each run go in
a line of their own (`hive.bash.files._write_lines`). A caller that needs its writes done before it
goes on (a final record waits for the loose end before it, a new run for the previous run's
loose end to be set aside) awaits them; the others are carried out soon after.

A final record is saved only once the model allows it (`OwedEnds.may_record_end`): a record that
says a task ended, with nothing on disk owing its end, would lose the end at the next crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import trio

from hive import telemetry
from hive.agent_socket import Wake, WakeCourier, end_id
from hive.bash._batches import Batcher
from hive.bash._errors import DiskError
from hive.bash._task import Task
from hive.bash.ends._describe import wake_body
from hive.bash.ends._owed import (
    Abandoned,
    Acked,
    Began,
    Content,
    DropLooseEnd,
    Ended,
    Event,
    Found,
    Held,
    Interval,
    Key,
    LooseEndAction,
    OwedEnds,
    PersistLooseEnd,
    Place,
    Recovered,
    Released,
    SetAside,
    Spawning,
    Stored,
    Told,
    Unclaimed,
)
from hive.bash.ends._watch import saved_watch
from hive.bash.files._durable import make_durable
from hive.bash.files._records import LooseEnd, OwedWake, TaskRecord
from hive.bash.files._store import TaskStore, UnreadableLooseEnd, serial_from_files
from hive.bash.files._task_records import TaskRecords, disk_note
from hive.bash.files._write_lines import UnclaimedEnd, Write, WriteLines
from hive.daemon import SendWake, WithdrawWake

log = logging.getLogger(__name__)

ComposeWake = Callable[[TaskRecord], OwedWake]
"""How a task's wake is worded: its state, exit code and last stdout lines (blocking: it reads them)."""


def wake_for(record: TaskRecord, stdout: str) -> OwedWake:
    """The wake for a task's end, given the tail of its stdout."""
    return OwedWake(sender=f"bash-task-{record.id}", body=wake_body(record, stdout))


@attrs.define(eq=False)
class Ledger(TaskRecords):
    """Task records and loose ends on disk, kept in line with the owed-end model."""

    courier: WakeCourier[Key]
    reads: Batcher
    compose: ComposeWake
    ends: OwedEnds = attrs.field()
    _tasks: dict[Key, Task] = attrs.field(factory=dict)
    """The runs the model is about, by key (a superseded run is no longer the manager's by id)."""
    _unclaimed: dict[Key, UnclaimedEnd] = attrs.field(factory=dict)
    _lines: WriteLines = attrs.field(init=False)
    _removed_unsynced: bool = False
    """Loose ends were removed since the directory was last fsynced (see `sync_ends`)."""

    @ends.default
    def _owed_ends(self) -> OwedEnds:
        return OwedEnds(shown_needs_ack=self.courier.agent_socket is not None)

    @_lines.default
    def _write_lines(self) -> WriteLines:
        return WriteLines(self._write)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:  # noqa: ASYNC128 - passed on
        """Carry out the writes nobody awaits until cancelled; once it has stopped, a caller
        that awaits writes carries out their lines itself."""
        await self._lines.serve(task_status=task_status)

    # -- what the model knows -------------------------------------------------------------------

    def owes(self, task: Task) -> bool:
        """Whether the agent is owed this task's end."""
        return self.ends.owes(task.key)

    def held(self, task: Task) -> bool:
        """Whether a caller waits to answer with this task's end."""
        return self.ends.held(task.key)

    def writing(self, task: Task) -> bool:
        """Whether a write of this task's loose end is lined up or under way."""
        return self._lines.pending(task.key)

    async def wait_written(self, task: Task) -> None:
        """Wait until the writes of this task's loose end lined up so far are done."""
        await self._lines.wait(task.key)

    # -- records --------------------------------------------------------------------------------

    def may_save(self, task: Task) -> bool:
        """A final record whose end is owed waits until a loose end owing it has landed (see
        above)."""
        return not task.final or self.ends.may_record_end(task.key)

    # -- wakes ----------------------------------------------------------------------------------

    async def wake_of(self, task: Task) -> OwedWake:
        """The wake for the task's end, composed once (its tail read in a worker thread)."""
        if task.owed_wake is None:
            task.owed_wake = await self.reads.run(self.compose, task.record)
        return task.owed_wake

    def _wake_now(self, task: Task) -> OwedWake:
        # Composed as the task ended, or by `wake_of`; composing it here, on the loop, is the
        # fallback for a task that came by neither.
        if task.owed_wake is None:
            task.owed_wake = self.compose(task.record)
        return task.owed_wake

    # -- the protocol ---------------------------------------------------------------------------

    async def begin(self, task: Task) -> None:
        """A new run takes its id: it owes its end from now, held for its caller, and the ends
        still owed under the id are set aside first (durably). A disk that cannot take them
        refuses the new run: :class:`DiskError` (then call `abandon`)."""
        self._tasks[task.key] = task
        writes = self._handle(Began(task.key))
        await self._lines.carry_out(writes)
        failed = next((w for w in writes if not w.landed), None)
        if failed is not None:
            why = "" if failed.error is None else f" ({failed.error.strerror or failed.error})"
            raise DiskError(
                f"cannot keep the unreported end of the previous task named {task.id}{why}; nothing "
                f"ran. Ask status({task.id!r}) first, or free space in {self.store.loose_ends_dir}"
            )

    def spawning(self, task: Task) -> LooseEnd:
        """The loose end to save with the new run's record, before its process starts."""
        if not self.ends.handle(Spawning(task.key)):
            raise DiskError(
                f"cannot keep the unreported end of the previous task named {task.id}: it could not "
                f"be set aside; nothing ran. Free space in {self.store.loose_ends_dir}, and run it again"
            )
        return _loose_end_of(task, None)

    def save_start(self, record: TaskRecord, loose_end: LooseEnd) -> None:
        """Save a new run's record and loose end, not fsynced (blocking: the spawn's worker
        thread calls it before the process starts); they are made durable with those of the
        runs that start with it, before its caller is told it started (see `started_files`)."""
        self.store.save_record(record, durable=False)
        self.store.save_loose_end(loose_end, durable=False)

    def started_files(self, task: Task) -> tuple[list[Path], list[Path]]:
        """What must be durable before the agent is told the task started: its record and loose
        end, and the directories that hold their names (and the files its start moved aside);
        for a task that waits in line, its command too, which it runs from when its turn comes
        (after a power cut, too)."""
        store = self.store
        files = [store.record_path(task.id), store.loose_end_path(task.id)]
        if task.record.queued is not None:
            files.append(store.cmd_path(task.id))
        return files, [store.tasks_dir, store.loose_ends_dir]

    def unsave_start(self, record: TaskRecord) -> None:
        """Remove what `save_start` saved for a run whose process then did not start (blocking)."""
        with contextlib.suppress(OSError):
            self.store.delete_record(record.id)
        with contextlib.suppress(OSError):
            self.store.delete_loose_end(record.id, record.serial)

    def spawned(self, task: Task) -> None:
        """The new run's process started, its record and loose end saved before it."""
        self._handle(Stored(task.key, Content.OPEN, Place.LATEST))

    def abandon(self, task: Task) -> None:
        """The new run's start failed: nothing ran, nothing of it is owed."""
        self._handle(Abandoned(task.key))

    async def end(self, task: Task) -> None:
        """The task has ended: its wake goes out if nobody holds it, and a loose end owing its
        end is on disk before this returns, where the model can have one there."""
        await self._lines.carry_out(self._handle(Ended(task.key)))

    def hold(self, task: Task) -> None:
        """A caller waits to answer with the task's end: its wake waits for it. Every hold is
        ended by `release`."""
        self._tasks[task.key] = task
        self._handle(Held(task.key))

    def release(self, task: Task, *, told: bool) -> None:
        """The caller that held ``task`` is done. ``told``: an answer carrying the final state
        was written to a client still connected, so the agent has seen the end. Otherwise an
        end that is still owed goes out as a wake once no other caller holds it."""
        self._handle(Released(task.key, told=told))

    async def told(self, task: Task) -> None:
        """The agent has seen the final state (a `status` answer): no wake is owed any more."""
        await self._lines.carry_out(self._handle(Told(task.key)))

    async def acked(self, key: Key) -> None:
        """The agent's socket acknowledged the wake of the end of run ``key`` (task id, serial)."""
        task = self._tasks.get(key)
        if task is not None and task.record.ended_at is not None:
            telemetry.wake_acknowledged(time.time() - task.record.ended_at)
        await self._lines.carry_out(self._handle(Acked(key)))

    # -- recovery -------------------------------------------------------------------------------

    async def load(self) -> tuple[list[TaskRecord], dict[Found, LooseEnd], list[str]]:
        """Every task record and every loose end on disk (by what the model makes of each), and
        the ids of the records that could not be read. A loose end that could not be read is
        not skipped: its name says whose end it owes (see `_stand_in`)."""
        store = self.store
        unreadable: list[str] = []
        torn: list[UnreadableLooseEnd] = []
        records = await trio.to_thread.run_sync(lambda: list(store.load_records(unreadable)))
        loose_ends = await trio.to_thread.run_sync(lambda: list(store.load_loose_ends(torn)))
        by_id = {r.id: r for r in records}
        for named in torn:
            stand_in = await trio.to_thread.run_sync(_stand_in, store, named, by_id.get(named.task_id))
            loose_ends.append((stand_in, named.serial is not None))
        found = {}
        for loose_end, earlier in loose_ends:
            key = (loose_end.task_id, loose_end.serial)
            found[Found(key, Place.OWN if earlier else Place.LATEST, _content(loose_end))] = loose_end
        return records, found, unreadable

    async def recovered(self, task: Task, loose_end: LooseEnd | None, at: Place | None) -> None:
        """A restarted daemon found ``task``, and ``loose_end``, its own, at ``at`` (or none). A
        task that had not ended is owed, and one that had, if its loose end is there: its wake
        goes out again, with the same end id."""
        self._tasks[task.key] = task
        if task.final and loose_end is not None and task.owed_wake is None:
            task.owed_wake = loose_end.wake or await self.reads.run(self.compose, task.record)
        content = Content.NONE if loose_end is None else _content(loose_end)
        await self._lines.carry_out(
            self._handle(Recovered(task.key, ended=task.final, content=content, at=at))
        )

    async def unclaimed(self, loose_end: LooseEnd, at: Place, *, superseded: bool, unknown: str) -> None:
        """A restarted daemon found ``loose_end`` with no task of its own: its end is owed as it
        tells it (``unknown`` says why there is no more to tell, if it has no wake), set aside
        first if it is ``superseded`` at the latest path of its id."""
        key = (loose_end.task_id, loose_end.serial)
        wake = loose_end.wake or OwedWake(
            sender=f"bash-task-{loose_end.task_id}",
            body=f"bash task {loose_end.task_id} (`{loose_end.cmd}`): {unknown}",
        )
        self._unclaimed[key] = UnclaimedEnd(loose_end, wake)
        await self._lines.carry_out(self._handle(Unclaimed(key, at, superseded=superseded)))

    # -- durability -----------------------------------------------------------------------------

    async def sync_ends(self, current: Mapping[str, Task]) -> None:
        """Make the ends since the last interval durable: the final records fsynced, the loose
        end of each end still owed rewritten with its wake and fsynced, and the removals of the
        loose ends of ends told, in one worker trip for all of them (on a journalled file system
        the first fsync commits the rest). A removal lost to a power loss is an end told twice,
        never one lost. ``current``: the tasks by id (a record replaced by a later run's is
        not this one's to sync).
        """
        records = self.unsynced_records(current)
        writes = self._handle(Interval())
        await self._lines.carry_out(writes)
        store = self.store
        loose_ends = []
        for write in writes:
            action = write.action
            if write.landed and isinstance(action, PersistLooseEnd):
                task_id, serial = action.key
                loose_ends.append(store.loose_end_path(task_id, serial if action.at is Place.OWN else None))
        removed, self._removed_unsynced = self._removed_unsynced, False
        # The records' directory before the loose ends': a removal of a loose end is durable
        # only once the final record that tells its end is.
        directories = [store.tasks_dir] if records else []
        if loose_ends or removed:
            directories.append(store.loose_ends_dir)
        if directories:
            await self.writes.run(make_durable, records + loose_ends, directories)

    # -- carrying out the model's actions -------------------------------------------------------

    def _handle(self, event: Event) -> list[Write]:
        """Hand ``event`` to the model; the wakes go to the courier at once, and the loose-end
        writes into their lines (returned, for a caller that awaits them)."""
        lined: list[Write] = []
        for action in self.ends.handle(event):
            match action:
                case SendWake(key, shown):
                    self._send(key, shown_at=time.time() if shown else None)
                case WithdrawWake(key):
                    self.courier.withdraw(key)
                case PersistLooseEnd() | SetAside() | DropLooseEnd():
                    lined.append(self._line_up(action))
        if not isinstance(event, Interval):
            self._settle_entries(event.key)
        return lined

    def _settle_entries(self, key: Key) -> None:
        """Forget a run the model has nothing more to say about (its lined-up writes keep it)."""
        if self.ends.debt(key) is None:
            self._tasks.pop(key, None)
            self._unclaimed.pop(key, None)

    def _send(self, key: Key, *, shown_at: float | None = None) -> None:
        task = self._tasks.get(key)
        if task is not None:
            wake = self._wake_now(task)
        else:
            unclaimed = self._unclaimed.get(key)
            if unclaimed is None:
                log.warning("no wake to send for %s:%s: neither a task nor a loose end of it is known", *key)
                return
            wake = unclaimed.wake
        trace = task.trace if task is not None else None
        self.courier.send(
            key,
            self.courier.agent_socket,
            Wake(
                sender=wake.sender,
                body=wake.body,
                end_id=end_id(*key),
                traceparent=trace.traceparent if trace is not None else None,
                shown_at=shown_at,
            ),
        )

    def _line_up(self, action: LooseEndAction) -> Write:
        key = action.key
        write = Write(action, self._tasks.get(key), self._unclaimed.get(key))
        self._lines.line_up(write)
        return write

    async def _write(self, write: Write) -> bool:
        """Carry out one loose-end write; whether it landed (and the model was told so)."""
        store = self.store
        task = write.task
        try:
            match write.action:
                case PersistLooseEnd(key, wake, at, durable):
                    if task is None:
                        return False  # a loose end with no task is never rewritten
                    loose_end = _loose_end_of(task, await self.wake_of(task) if wake else None)
                    await self.writes.run(
                        store.save_loose_end, loose_end, earlier=at is Place.OWN, durable=durable
                    )
                    self._handle(Stored(key, Content.WAKE if wake else Content.OPEN, at))
                case SetAside(key):
                    if task is not None:
                        loose_end = _loose_end_of(task, await self.wake_of(task))
                    elif write.unclaimed is not None:
                        loose_end = write.unclaimed.loose_end
                    else:
                        return False
                    await self.writes.run(store.set_aside_loose_end, loose_end)
                    self._handle(Stored(key, Content.WAKE, Place.OWN))
                case DropLooseEnd(key):
                    self._removed_unsynced = True
                    await self.writes.run(store.delete_loose_end, *key, durable=False)
                    self._handle(Stored(key, Content.NONE, None))
        except OSError as exc:
            write.error = exc
            task_id = write.action.key[0]
            log.warning("cannot update the loose end of task %s: %s", task_id, exc)
            if task is not None and not isinstance(write.action, DropLooseEnd):
                self.note(task, disk_note("its loose end", exc))
            return False
        return True


def _loose_end_of(task: Task, wake: OwedWake | None) -> LooseEnd:
    record = task.record
    return LooseEnd(
        task_id=record.id, serial=record.serial, cmd=record.cmd, since=record.created_at, wake=wake
    )


def _stand_in(store: TaskStore, named: UnreadableLooseEnd, record: TaskRecord | None) -> LooseEnd:
    """What an unreadable loose end owed, as its name and the task's record tell it (blocking).

    The latest run's, where its record is there: that record tells its end. Else the task is
    taken to have ended ``interrupted`` (a crash or a power cut left the loose end so; the
    task, where its files are left, is recovered from them, and what they say is told)."""
    task_id = named.task_id
    serial = named.serial
    if serial is None and record is not None:
        serial = record.serial
    if serial is None:
        # A watched run's state keeps its serial: its end is owed under the id its match wakes have.
        watched = saved_watch(store, task_id, None)
        serial = (
            watched.serial
            if watched is not None
            else serial_from_files([*store.task_paths(task_id)[1:], named.path], task_id)
        )
    if record is not None and record.serial == serial:
        return LooseEnd(task_id=task_id, serial=serial, cmd=record.cmd, since=record.created_at)
    try:
        since = os.stat(named.path, follow_symlinks=False).st_mtime
    except OSError:
        since = time.time()
    wake = OwedWake(
        sender=f"bash-task-{task_id}",
        body=(
            f"bash task {task_id} ended: interrupted (its loose end was found empty or torn after "
            "a crash or a power cut: what it ran and how it ended are not known)\n"
            f"status({task_id!r}) tells what is left of it."
        ),
    )
    return LooseEnd(task_id=task_id, serial=serial, cmd="(not known)", since=since, wake=wake)


def _content(loose_end: LooseEnd) -> Content:
    return Content.OPEN if loose_end.wake is None else Content.WAKE
