"""The task manager: starts, watches, stops and re-adopts bash tasks.

Every task is watched by a supervisor, a child of the manager's nursery. Output never
passes through the daemon: the task writes its own files. Cancelling the manager (an
orderly daemon shutdown) cancels the supervisors but never signals a task: the tasks
keep running, and the next daemon re-adopts them from their records.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable

import attrs
import trio

from hive._limits import NAME_RULE, is_name
from hive.agent_socket import WakeCourier
from hive.bash._batches import Batcher, BatcherStopped
from hive.bash._errors import BadArgument, NameBusy, UnknownTask
from hive.bash._line import RunLine
from hive.bash._model import Spawned
from hive.bash._recovery import recover
from hive.bash._settings import TaskSettings
from hive.bash._task import Task
from hive.bash.ends._ledger import Ledger, wake_for
from hive.bash.ends._owed import Key
from hive.bash.ends._watch import Watcher
from hive.bash.files._durable import GroupSync
from hive.bash.files._records import OwedWake, TaskRecord
from hive.bash.files._store import TaskStore, read_tail
from hive.bash.procs._spawning import Spawner
from hive.bash.procs._stopping import Stopper
from hive.bash.procs._supervision import launch, supervise, withdraw

__all__ = ["Task", "TaskManager", "TaskSettings"]

log = logging.getLogger(__name__)

WAKE_STDOUT_BYTES = 2048
SPAWN_LANES = 8
SPAWNS_PER_TRIP = 8
LAST_SYNC_SECS = 10.0
"""How long an orderly stop may spend making the last ends durable."""


@attrs.define(eq=False)
class TaskManager:
    """Starts, watches and stops the tasks, and answers for them by id. What it must not lose
    (records, loose ends, the ends owed to the agent) it keeps through its :class:`Ledger`; the
    signals it sends are its :class:`Stopper`'s."""

    store: TaskStore
    settings: TaskSettings
    courier: WakeCourier[Key]
    tasks: dict[str, Task] = attrs.field(factory=dict)
    nursery: trio.Nursery | None = None
    clock: Callable[[], float] = time.time
    reads: Batcher = attrs.field(factory=Batcher)
    """Where the reads for answers and ends run (exit files, tails): many tasks' to a trip."""
    spawns: Batcher = attrs.field(factory=lambda: Batcher(lanes=SPAWN_LANES, per_trip=SPAWNS_PER_TRIP))
    """Where tasks are started (their files, record and loose end saved, the wrapper forked)."""
    writes: Batcher = attrs.field(factory=Batcher)
    """Where records and loose ends are saved and removed, apart from the reads, which an
    answer waits for."""
    syncs: GroupSync = attrs.field(factory=GroupSync)
    """Where the records and loose ends of the tasks that start together are made durable together."""
    ledger: Ledger = attrs.field(init=False)
    """The records and loose ends on disk, and the ends owed to the agent."""
    stopper: Stopper = attrs.field(init=False)
    watcher: Watcher = attrs.field(init=False)
    """Watches the output of the runs given ``notify_on``, and owes their match wakes."""
    line: RunLine = attrs.field(init=False)
    """The places to run (``max_running``), and the tasks waiting for one."""
    spawner: Spawner = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.line = RunLine(self.settings.max_running)
        self.ledger = Ledger(
            store=self.store,
            writes=self.writes,
            courier=self.courier,
            reads=self.reads,
            compose=self.compose_wake,
        )
        self.stopper = Stopper(self.ledger, self.settings, self.tasks, self.clock)
        line_seconds = self.settings.line_seconds
        self.watcher = Watcher(self.store, self.courier, self.reads, self.writes, self.syncs, line_seconds)
        self.spawner = Spawner(self.store, self.settings, self.ledger, self.watcher)

    # -- lifecycle ------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[TaskManager] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover the tasks of earlier runs, then watch tasks until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                await nursery.start(self.spawns.serve)
                await nursery.start(self.reads.serve)
                await nursery.start(self.writes.serve)
                await nursery.start(self.syncs.trips.serve)
                await nursery.start(self.ledger.serve)
                self.stopper.nursery = nursery
                nursery.start_soon(self.stopper.cap.run)
                self.courier.start(nursery, self._acked)
                await recover(self)
                for task in list(self.tasks.values()):
                    if task.record.notify_on is not None:
                        nursery.start_soon(self.watcher.watch, task)
                self.start_due()
                nursery.start_soon(self._watch_running)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            # An orderly stop leaves the ends it saw durable, and each owed one's wake in its
            # loose end (a crash leaves that to the next start's recovery).
            with trio.CancelScope(shield=True), trio.move_on_after(LAST_SYNC_SECS):
                await self.ledger.sync_ends(self.tasks)

    async def _acked(self, key: Key) -> None:
        """The agent socket acknowledged a wake: an end's (the ledger's) or a match's (the watcher's)."""
        if self.watcher.owns(key):
            await self.watcher.acked(key)
        else:
            await self.ledger.acked(key)

    def supervise_soon(self, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
        """Watch a task until it ends; ``wait_exit`` returns when its wrapper has exited. It
        holds a place to run until then."""
        assert self.nursery is not None
        self.line.occupy(task.key)
        self.nursery.start_soon(supervise, self, task, wait_exit)

    def requeue(self, task: Task) -> None:
        """Put back in line a task a previous daemon left waiting for a place to run."""
        self.line.join(task, saved=True)

    def place(self, task: Task) -> int | None:
        """The task's place in the line of tasks waiting to run (1: the next); None if it does not wait."""
        return self.line.place(task.key)

    def register(self, task: Task) -> None:
        """Know ``task`` by its id (a later run of a name replaces the earlier one here)."""
        self.tasks[task.id] = task

    def compose_wake(self, record: TaskRecord) -> OwedWake:
        """The wake for a task's end: its state, exit code, notes and last stdout lines (blocking: reads them)."""
        return wake_for(record, self.wake_tail(record.id))

    def wake_tail(self, task_id: str) -> str:
        """The last lines of stdout a task's wake carries (blocking)."""
        return read_tail(self.store.out_path(task_id), WAKE_STDOUT_BYTES).text

    # -- queries --------------------------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        """The task with this id; :class:`UnknownTask` if there is none."""
        task = self.tasks.get(task_id)
        if task is None:
            raise UnknownTask(f"no task has id {task_id!r}; `list` shows them all")
        return task

    def newest_first(self) -> list[TaskRecord]:
        """Every task's record, the newest first."""
        return sorted((t.record for t in self.tasks.values()), key=lambda r: r.created_at, reverse=True)

    # -- run ------------------------------------------------------------------------------------

    async def start(
        self,
        cmd: str,
        *,
        name: str | None = None,
        timeout_secs: float | None = None,
        notify_on: str | None = None,
        notify_max: int | None = None,
        traceparent: str | None = None,
    ) -> tuple[Task, Task | None]:
        """Start a task; returns it and, if a name was reused, the previous task when its end
        had not reached the agent yet. The caller holds both: its answer reports the previous
        end too, and releases the previous task as told only if it reached a connected client.
        ``traceparent``: the span the call was made in (the task's span is its child)."""
        task_id = self._new_id(name)
        previous = self.tasks.get(task_id)
        line = self.line
        waits = line.must_wait()
        record = TaskRecord(
            id=task_id,
            serial=secrets.token_hex(8),
            cmd=cmd,
            cwd=str(self.settings.workdir),
            created_at=self.clock(),
            named=name is not None,
            timeout_secs=timeout_secs,
            notify_on=notify_on,
            notify_max=notify_max,
            queued=line.take_number() if waits else None,
        )
        # Registered, and its place taken (to run, or in line), before anything awaits: the
        # name is held from here on, and the order of callers is the order of the line.
        task = Task(record, parent=traceparent)
        self.register(task)
        if waits:
            line.join(task, saved=False)
        else:
            line.occupy(task.key)
        unreported = None
        if previous is not None and self.ledger.owes(previous):
            # Still owed, on its own: the caller reports it, and this run's loose end must not
            # replace its (the ledger sets it aside first).
            self.hold(previous)
            unreported = previous
        try:
            # Its end is owed from here, and the caller holds it (it may yet tell the end inline).
            await self.ledger.begin(task)
            if previous is not None:
                # Its last state on disk before its files are moved aside for this run (see `Spawner.start`).
                await self.ledger.save(previous)
            loose_end = self.ledger.spawning(task)
            if waits:
                await self.spawns.run(self.spawner.save_waiting, record, loose_end)
            else:
                child, held_by = await self.spawns.run(self.spawner.start, record, loose_end)
        except BaseException:
            line.drop(task.key)
            line.vacate(task.key)
            self._forget(task, previous)
            self.ledger.abandon(task)
            if unreported is not None:
                self.release(unreported, told=False)
            self.start_due()
            raise
        # Its record and loose end were saved before its process started (or it waits in
        # line); its pid is saved later (at its end, or by the timer). A daemon that dies
        # before that finds it by its wrapper's mark (see `_recovery`).
        self.ledger.spawned(task)
        assert self.nursery is not None
        self.nursery.start_soon(self._make_durable, task)
        if waits:
            if line.saved(task.key):
                # Stopped while its files were being saved.
                self.nursery.start_soon(withdraw, self, task)
            self.start_due()
        else:
            self.ledger.change(task, Spawned(), started_at=self.clock(), pid=child.pid, held_by=held_by)
            self.nursery.start_soon(supervise, self, task, child.wait)
        if notify_on is not None:
            self.nursery.start_soon(self.watcher.watch, task)
        return task, unreported

    async def _make_durable(self, task: Task) -> None:
        """Make what was saved as ``task`` started durable, with what other starts saved meanwhile."""
        files, directories = self.ledger.started_files(task)
        if task.record.notify_on is not None:
            files.append(self.watcher.path(task.id, task.record.serial))
        try:
            await self.syncs.sync(files, directories)
        except BatcherStopped:
            pass  # the daemon is stopping: nobody waits to be told the task started
        finally:
            task.durable.set()

    def _new_id(self, name: str | None) -> str:
        """The id of a new run: ``name``, if no task that has not ended holds it; else one drawn."""
        if name is None:
            task_id = secrets.token_hex(6)
            while task_id in self.tasks:
                task_id = secrets.token_hex(6)
            return task_id
        if not is_name(name):
            raise BadArgument(f"bad name {name!r}: use {NAME_RULE}")
        previous = self.tasks.get(name)
        if previous is not None and not previous.final:
            raise NameBusy(
                f"name {name!r} is held by a task that is still {previous.record.state.value}; "
                f"wait for it (status({name!r}, wait_seconds=30)), stop it (stop({name!r})), "
                "or choose another name"
            )
        return name

    def _forget(self, task: Task, previous: Task | None) -> None:
        if previous is not None:
            self.tasks[task.id] = previous
        else:
            self.tasks.pop(task.id, None)

    # -- telling --------------------------------------------------------------------------------

    def hold(self, task: Task) -> None:
        """A caller (`status`, `stop`) waits to answer with the task's end: its wake waits for it.

        (`start` holds the task it returns for its caller.) Every hold is ended by `release`.
        """
        self.ledger.hold(task)

    def release(self, task: Task, *, told: bool) -> None:
        """The caller that held ``task`` is done. ``told``: an answer carrying the final state
        was written to a client still connected, so the agent has seen the end. Otherwise an
        end that is still owed goes out as a wake once no other caller holds it."""
        self.ledger.release(task, told=told and task.final)

    # -- the line ---------------------------------------------------------------------------------

    def start_due(self) -> None:
        """Start the tasks in line that have a place to run now."""
        assert self.nursery is not None
        for task in self.line.due():
            self.nursery.start_soon(launch, self, task)

    async def _watch_running(self) -> None:
        """Every interval: check the running tasks (the output cap, the disk) and what ended
        tasks left behind (see `Stopper.survey`), and save the records that changed and the
        watch states a full disk refused.

        File growth cannot be awaited without a wake-up per write, so this is a timer: one
        worker-thread hop per interval for all tasks, whatever the output's size.
        """
        assert self.nursery is not None
        while True:
            await trio.sleep(self.settings.output_check_interval)
            await self.ledger.sync_ends(self.tasks)
            await self.stopper.survey()
            for task in list(self.tasks.values()):
                # Includes a save that failed earlier (a full disk): it is tried again.
                if task.record_dirty and not task.write_lock.locked():
                    self.nursery.start_soon(self.ledger.save, task)
            await self.watcher.save_again()

    def request_stop(self, task: Task) -> bool:
        """Begin stopping a running task, or take a waiting one out of the line; False if it is
        neither, or already stopping."""
        if self.line.waits(task.key):
            if self.line.leave(task.key):
                assert self.nursery is not None
                self.nursery.start_soon(withdraw, self, task)
            return True
        return self.stopper.request(task)
