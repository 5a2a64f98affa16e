"""The task manager: starts, watches, stops and re-adopts bash tasks.

Every task is watched by a supervisor, a child of the manager's nursery. Output never
passes through the daemon: the task writes its own files. Cancelling the manager (an
orderly daemon shutdown) cancels the supervisors but never signals a task: the tasks
keep running, and the next daemon re-adopts them from their records.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from functools import partial
from pathlib import Path

import attrs
import trio

from hive import telemetry
from hive._limits import NAME_RULE, is_name
from hive.bash import _cgroups, _limits, _procs
from hive.bash._batches import Batcher, BatcherStopped
from hive.bash._courier import Key, WakeCourier
from hive.bash._durable import GroupSync
from hive.bash._errors import BadArgument, BashError, DiskError, NameBusy, TaskLimit, UnknownTask
from hive.bash._ledger import Ledger, wake_for
from hive.bash._line import RunLine
from hive.bash._model import Event, Exited, HeldBy, Spawned, Vanished, Withdrawn
from hive.bash._output import NewOutput, check_offset, read_new, stream_size, until_grown
from hive.bash._records import LooseEnd, OwedWake, TaskRecord
from hive.bash._recovery import recover
from hive.bash._settings import TaskSettings
from hive.bash._stopping import FILLED_UP, FSIZE_MARGIN, Stopper
from hive.bash._store import ExitStatus, RunFiles, Tail, TaskStore, read_tail
from hive.bash._task import Task
from hive.bash._watch import Watcher

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
    courier: WakeCourier
    tasks: dict[str, Task] = attrs.field(factory=dict)
    _nursery: trio.Nursery | None = None
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
        self.watcher = Watcher(self.store, self.courier, self.reads, self.writes, self.syncs)

    # -- lifecycle ------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[TaskManager] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover the tasks of earlier runs, then watch tasks until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.spawns.serve)
                await nursery.start(self.reads.serve)
                await nursery.start(self.writes.serve)
                await nursery.start(self.syncs.trips.serve)
                await nursery.start(self.ledger.serve)
                await nursery.start(self.stopper.serve)
                await nursery.start(partial(self.courier.run, self._acked))
                await recover(self)
                for task in list(self.tasks.values()):
                    if task.record.notify_on is not None:
                        nursery.start_soon(self.watcher.watch, task)
                self._start_due()
                nursery.start_soon(self._watch_running)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            # An orderly stop leaves the ends it saw durable, and each owed one's wake in its
            # loose end (a crash leaves that to the next start's recovery).
            with trio.CancelScope(shield=True), trio.move_on_after(LAST_SYNC_SECS):
                await self._sync_ends()

    async def _acked(self, key: Key) -> None:
        """The agent socket acknowledged a wake: an end's (the ledger's) or a match's (the watcher's)."""
        if self.watcher.owns(key):
            await self.watcher.acked(key)
        else:
            await self.ledger.acked(key)

    def supervise_soon(self, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
        """Watch a task until it ends; ``wait_exit`` returns when its wrapper has exited. It
        holds a place to run until then."""
        assert self._nursery is not None
        self.line.occupy(task.key)
        self._nursery.start_soon(self._supervise, task, wait_exit)

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
        return wake_for(record, self._wake_tail(record.id))

    def _wake_tail(self, task_id: str) -> str:
        return read_tail(self.store.out_path(task_id), WAKE_STDOUT_BYTES).text

    async def output_tails(self, task_id: str) -> tuple[Tail, Tail]:
        """The last 4 KiB of a task's stdout and stderr, read in a worker thread."""
        store = self.store
        return await self.reads.run(
            lambda: (read_tail(store.out_path(task_id)), read_tail(store.err_path(task_id)))
        )

    def stream_path(self, task_id: str, stream: str) -> Path:
        """The file of a task's ``stdout`` or ``stderr``."""
        return self.store.out_path(task_id) if stream == "stdout" else self.store.err_path(task_id)

    async def new_output(self, task: Task, offsets: Mapping[str, int]) -> list[NewOutput]:
        """What each stream named in ``offsets`` holds past its offset (read in a worker thread)."""
        final = task.final
        wanted = [(stream, self.stream_path(task.id, stream), offset) for stream, offset in offsets.items()]
        return await self.reads.run(
            lambda: [read_new(stream, path, offset, final=final) for stream, path, offset in wanted]
        )

    async def wait_output(self, task: Task, offsets: Mapping[str, int], seconds: float) -> None:
        """Until a stream named in ``offsets`` has bytes past its offset, the task has ended, or
        ``seconds`` have passed; an offset past its stream's end is refused (`OffsetPastEnd`)."""
        streams = list(offsets.items())
        paths = {self.stream_path(task.id, stream): offset for stream, offset in streams}

        async def grown(paths: Mapping[Path, int]) -> bool:
            sizes = await self.reads.run(lambda: [stream_size(path) for path in paths])
            return any(size > offset for size, offset in zip(sizes, paths.values(), strict=True))

        sizes = await self.reads.run(lambda: [stream_size(path) for path in paths])
        for (stream, offset), size in zip(streams, sizes, strict=True):
            check_offset(stream, offset, size)
        if (
            seconds <= 0
            or task.final
            or any(size > offset for (_, offset), size in zip(streams, sizes, strict=True))
        ):
            return
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:

                async def ended() -> None:
                    await task.ended.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(ended)
                await until_grown(paths, grown)
                nursery.cancel_scope.cancel()

    # -- queries --------------------------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        task = self.tasks.get(task_id)
        if task is None:
            raise UnknownTask(f"no task has id {task_id!r}; `list` shows them all")
        return task

    def newest_first(self) -> list[TaskRecord]:
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
                # Its last state on disk before its files are moved aside for this run (see `_spawn`).
                await self.ledger.save(previous)
            loose_end = self.ledger.spawning(task)
            if waits:
                await self.spawns.run(self._save_waiting, record, loose_end)
            else:
                child, held_by = await self.spawns.run(self._spawn, record, loose_end)
        except BaseException:
            line.drop(task.key)
            line.vacate(task.key)
            self._forget(task, previous)
            self.ledger.abandon(task)
            if unreported is not None:
                self.release(unreported, told=False)
            self._start_due()
            raise
        # Its record and loose end were saved before its process started (or it waits in
        # line); its pid is saved later (at its end, or by the timer). A daemon that dies
        # before that finds it by its wrapper's mark (see `_recovery`).
        self.ledger.spawned(task)
        assert self._nursery is not None
        self._nursery.start_soon(self._make_durable, task)
        if waits:
            if line.saved(task.key):
                # Stopped while its files were being saved.
                self._nursery.start_soon(self._withdraw, task)
            self._start_due()
        else:
            self.ledger.change(task, Spawned(), started_at=self.clock(), pid=child.pid, held_by=held_by)
            self._nursery.start_soon(self._supervise, task, child.wait)
        if notify_on is not None:
            self._nursery.start_soon(self.watcher.watch, task)
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

    async def durable(self, task: Task) -> None:
        """Wait until what was saved as ``task`` started is durable: an acknowledged start
        survives a power cut."""
        await task.durable.wait()

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

    def _spawn(self, record: TaskRecord, loose_end: LooseEnd) -> tuple[_procs.Child, HeldBy]:
        """Create the task's files, an earlier run's moved aside, save its record and loose end,
        make its cgroup (where one can be made) and start it in it (blocking: run in a worker
        thread); the child and what holds it. A file that cannot be written is a
        :class:`DiskError`; a process that cannot be started, a :class:`~hive.bash._procs.SpawnError`.
        Either way nothing is left on disk, and nothing ran."""
        store = self.store

        @contextlib.contextmanager
        def new_run(record: TaskRecord) -> Iterator[RunFiles]:
            with store.new_run(record.id, record.cmd.encode()) as files, self._unsaved_unless_started(record):
                # On disk before the process starts, so that no crash of the daemon can lose a
                # task that ran; not fsynced (see `_recovery` for what a power loss keeps).
                self.ledger.save_start(record, loose_end)
                self.watcher.save_start(record)
                yield files

        return self._start_process(record, new_run)

    def _save_waiting(self, record: TaskRecord, loose_end: LooseEnd) -> None:
        """Create the files of a task that waits for a place to run, an earlier run's moved
        aside, and save its record and loose end (blocking); a file that cannot be written is a
        :class:`DiskError`, and then nothing is left on disk."""
        store = self.store
        if not store.has_space():
            full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise DiskError(_cannot_create(full, store.tasks_dir))
        try:
            with store.new_run(record.id, record.cmd.encode()), self._unsaved_unless_started(record):
                self.ledger.save_start(record, loose_end)
                self.watcher.save_start(record)
        except OSError as exc:
            raise DiskError(_cannot_create(exc, store.tasks_dir)) from None

    def _spawn_waiting(self, record: TaskRecord) -> tuple[_procs.Child, HeldBy]:
        """Start a task that waited for a place to run, in the files saved as it joined the
        line; its record is saved first, out of the line, and made durable (blocking). Errors
        as `_spawn`'s."""
        store = self.store

        @contextlib.contextmanager
        def saved_run(record: TaskRecord) -> Iterator[RunFiles]:
            with store.open_run(record.id) as files:
                # Out of the line on disk, durably, before its process starts: a daemon that
                # dies now (or a power cut) finds it by its wrapper's mark, or knows it may have
                # run, and never runs it twice.
                store.save_record(record)
                store.sync_tasks_dir()
                yield files

        return self._start_process(record, saved_run)

    def _start_process(
        self,
        record: TaskRecord,
        files_of: Callable[[TaskRecord], contextlib.AbstractContextManager[RunFiles]],
    ) -> tuple[_procs.Child, HeldBy]:
        """Make the task's cgroup (where one can be made) and start it there, in the files that
        ``files_of`` gives for its record, now saying what holds it (blocking)."""
        store = self.store
        _limits.check_room_for_a_task()
        if not store.has_space():
            full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise DiskError(_cannot_create(full, store.tasks_dir))
        cgroup_fd = self._make_cgroup(record)
        held_by = HeldBy.SUBREAPER if cgroup_fd is None else HeldBy.CGROUP
        record = attrs.evolve(record, held_by=held_by)
        started = False
        try:
            with files_of(record) as files:
                child = _procs.spawn_task(
                    cmd_fd=files.cmd,
                    exit_fd=files.exit,
                    exit_file=store.exit_path(record.id),
                    mark=_procs.wrapper_mark(record.serial),
                    tag=_procs.task_tag(record.id, record.serial),
                    cwd=self.settings.workdir,
                    stdout=files.out,
                    stderr=files.err,
                    cgroup_fd=cgroup_fd,
                    fsize_limit=self.settings.max_output_bytes + FSIZE_MARGIN,
                    unshare=self.settings.unshare,
                    subreaper=self.settings.unshare is None and self.settings.reap_orphans,
                )
                started = True
                return child, held_by
        except OSError as exc:
            fds = _limits.out_of_descriptors(exc)
            if fds is not None:
                raise TaskLimit(f"cannot start the task: {exc.strerror or exc}; {fds}; nothing ran") from None
            if isinstance(exc, _procs.SpawnError):
                raise
            raise DiskError(_cannot_create(exc, store.tasks_dir)) from None
        finally:
            if cgroup_fd is not None:
                os.close(cgroup_fd)
                cgroup = self.settings.cgroup_of(record)
                if cgroup is not None and not started:
                    _cgroups.remove(cgroup)

    def _make_cgroup(self, record: TaskRecord) -> int | None:
        """The task's own cgroup, made now: its directory open, for the wrapper to start in.
        None where there is no task-parent cgroup, or this one cannot be made (then the task
        is held as it would be without cgroups, and the log says why)."""
        parent = self.settings.cgroup_parent
        if parent is None:
            return None
        try:
            return _cgroups.create(parent / record.serial)
        except OSError as exc:
            log.warning("cannot make a cgroup for task %s (%s): the subreaper holds it", record.id, exc)
            return None

    @contextlib.contextmanager
    def _unsaved_unless_started(self, record: TaskRecord) -> Iterator[None]:
        """Remove the record and loose end saved for a task whose start then failed."""
        try:
            yield
        except BaseException:
            self.ledger.unsave_start(record)
            self.watcher.unsave_start(record)
            raise

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

    def _start_due(self) -> None:
        """Start the tasks in line that have a place to run now."""
        assert self._nursery is not None
        for task in self.line.due():
            self._nursery.start_soon(self._launch, task)

    async def _launch(self, task: Task) -> None:
        """Start a task whose turn has come (its place to run is taken); one that cannot be
        started ends ``interrupted``, saying why, and its place goes to the next."""
        record = attrs.evolve(task.record, queued=None, started_at=self.clock())
        try:
            child, held_by = await self.spawns.run(self._spawn_waiting, record)
        except (BashError, OSError) as exc:
            self.line.vacate(task.key)
            self._start_due()
            await self._end_unstarted(task, Vanished(), f"it could not be started when its turn came: {exc}")
            return
        self.ledger.change(
            task, Spawned(), queued=None, started_at=record.started_at, pid=child.pid, held_by=held_by
        )
        assert self._nursery is not None
        self._nursery.start_soon(self._supervise, task, child.wait)

    async def _withdraw(self, task: Task) -> None:
        """End a task taken out of the line by a stop: it never ran."""
        await self._end_unstarted(
            task, Withdrawn(), "it was stopped while it waited for a place to run: it never ran"
        )

    async def _end_unstarted(self, task: Task, event: Event, note: str) -> None:
        self.ledger.change(task, event, ended_at=self.clock())
        self.ledger.note(task, note)
        task.exited.set()
        await self._record_end(task, "")

    async def told(self, task: Task) -> None:
        """The agent has seen the final state (a `status` answer): no wake is owed any more."""
        await self.ledger.told(task)

    # -- waiting --------------------------------------------------------------------------------

    async def wait(self, task: Task, seconds: float) -> None:
        if seconds > 0 and not task.final:
            with trio.move_on_after(seconds):
                await task.ended.wait()

    # -- supervision ----------------------------------------------------------------------------

    async def _supervise(self, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
        # The outer nursery holds a stop sequence, which outlives the wrapper's exit (lingering
        # members of the group still get their grace); the deadline ends with the wrapper.
        if task.trace is None:
            task.trace = telemetry.task_started(task.id, task.record.started_at or self.clock(), task.parent)
        async with trio.open_nursery() as stoppers:
            task.supervisor = stoppers
            self.stopper.watch_output(task)
            if task.record.stop_reason is not None:
                # A stop was under way when the previous daemon went down: finish it.
                if task.record.stop_started_at is None:
                    self.ledger.change(task, stop_started_at=self.clock())
                stoppers.start_soon(self.stopper.finish, task)
            timeout = task.record.timeout_secs
            deadline = trio.CancelScope()
            if timeout is not None:
                stoppers.start_soon(self.stopper.deadline, task, timeout, deadline)
            returncode = await wait_exit()
            task.exited.set()
            deadline.cancel()
            self.line.vacate(task.key)
            self._start_due()
        task.supervisor = None
        await self._finish(task, returncode)
        self.stopper.ended(task)

    async def _watch_running(self) -> None:
        """Every interval: check the running tasks (the output cap, the disk) and what ended
        tasks left behind (see `Stopper.survey`), and save the records that changed and the
        watch states a full disk refused.

        File growth cannot be awaited without a wake-up per write, so this is a timer: one
        worker-thread hop per interval for all tasks, whatever the output's size.
        """
        assert self._nursery is not None
        while True:
            await trio.sleep(self.settings.output_check_interval)
            await self._sync_ends()
            await self.stopper.survey()
            for task in list(self.tasks.values()):
                # Includes a save that failed earlier (a full disk): it is tried again.
                if task.record_dirty and not task.write_lock.locked():
                    self._nursery.start_soon(self.ledger.save, task)
            await self.watcher.save_again()

    def request_stop(self, task: Task) -> bool:
        """Begin stopping a running task, or take a waiting one out of the line; False if it is
        neither, or already stopping."""
        if self.line.waits(task.key):
            if self.line.leave(task.key):
                assert self._nursery is not None
                self._nursery.start_soon(self._withdraw, task)
            return True
        return self.stopper.request(task)

    async def _finish(self, task: Task, returncode: int | None) -> None:
        store = self.store
        task_id = task.id

        def read_end() -> tuple[ExitStatus | None, bool, str, int]:
            return (
                store.read_exit_status(task_id),
                store.has_space(),
                self._wake_tail(task_id),
                store.output_size(task_id),
            )

        written, has_space, stdout, size = await self.reads.run(read_end)
        ledger = self.ledger
        if not has_space:
            ledger.note(task, FILLED_UP.format(store.tasks_dir))
        # Past the cap before a check saw it: it ended by itself, or its writers met the file
        # size limit (SIGXFSZ, see `_procs.WRAPPER`) and it ended of that.
        self.stopper.ended_past_cap(task, size, "it ended before a check stopped it")
        exit_code = self._exit_without_file(task, returncode) if written is None else written.code
        # The end is when the wrapper wrote the status (its last act), not when this daemon got
        # to it: on a loaded machine that is 100 ms and more later.
        # (A file's time is the kernel's coarse clock, up to a tick behind: never before the start.)
        now = self.clock()
        ended_at = (
            now if written is None else max(min(written.written_at, now), task.record.started_at or 0.0)
        )
        ledger.change(task, Exited(), exit_code=exit_code, ended_at=ended_at)
        await self._record_end(task, stdout)

    async def _record_end(self, task: Task, stdout: str) -> None:
        """Tell the ledger of the task's end (its record changed already); ``stdout``: the tail
        its wake carries."""
        ledger = self.ledger
        record = task.record
        ended_at = record.ended_at or self.clock()
        telemetry.task_ended(
            task.trace,
            record.state.value,
            record.exit_code,
            ended_at=ended_at,
            duration=record.duration(ended_at),
        )
        task.owed_wake = wake_for(record, stdout)
        task.ended.set()
        # Its wake goes out now if nobody holds it (before the saves: if the daemon dies before
        # they land, the loose end that already exists still owes the end, so the wake is sent
        # again), and a loose end owing it is on disk before its final record.
        await ledger.end(task)
        # The loose end saved as the task started still owes the end (a restarted daemon
        # composes the wake from the final record), so this record is written at once and
        # the rest waits for `_sync_ends`: most ends are told within moments (an answer, an
        # acknowledged wake), and their loose end is then removed, not rewritten.
        await ledger.save(task, durable=False)
        ledger.recorded_end(task)
        task.recorded.set()

    def _exit_without_file(self, task: Task, returncode: int | None) -> int | None:
        """The exit code of a task whose `.exit` holds no status, and a note on why it has none."""
        if returncode is not None and returncode < 0:
            killed_by = signal.Signals(-returncode)
            limit = ""
            if killed_by is signal.SIGXFSZ:
                limit = f" (it met the file size limit, {self.settings.max_output_bytes + FSIZE_MARGIN} bytes a file)"
            self.ledger.note(task, f"its wrapper shell was killed by {killed_by.name}{limit}")
            return None
        if returncode is not None:
            # The wrapper exits with the command's status: only the file was lost.
            self.ledger.note(
                task,
                "its wrapper shell could not write the .exit file; the exit code is the one the "
                "wrapper exited with",
            )
            return returncode
        # Re-adopted after a restart: this daemon is not the wrapper's parent, and never saw
        # how it exited.
        if "SIGKILL" in task.record.signals:
            self.ledger.note(
                task, "it left no exit status: its wrapper shell was killed (SIGKILL) before writing one"
            )
        elif task.record.stop_reason is not None:
            self.ledger.note(
                task,
                "it left no exit status: its wrapper shell ended during the stop without writing one "
                "(it was re-adopted after a daemon restart, so how it ended is not known)",
            )
        else:
            self.ledger.note(
                task,
                "it left no exit status: its wrapper shell ended without writing one (it was "
                "re-adopted after a daemon restart, so how it ended is not known)",
            )
        return None

    async def _sync_ends(self) -> None:
        """Make the ends since the last interval durable (see `Ledger.sync_ends`)."""
        await self.ledger.sync_ends(self.tasks)


def _cannot_create(exc: OSError, tasks_dir: Path) -> str:
    what = f"cannot start the task: {exc.strerror or exc}"
    if exc.filename is not None:
        what += f" ({os.fsdecode(exc.filename)})"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{what}; the disk holding {tasks_dir} is full: free space there, and run it again"
    if exc.errno in (errno.EEXIST, errno.ELOOP):
        return f"{what}; something else is writing into {tasks_dir}: run it again"
    return (
        f"{what}; its files go in {tasks_dir}: fix that directory (permissions, file system) and run it again"
    )
