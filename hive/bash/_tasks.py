"""The task manager: starts, watches, stops and re-adopts bash tasks.

Every task is watched by a supervisor, a child of the manager's nursery. Output never
passes through the daemon: the task writes its own files. Cancelling the manager (an
orderly daemon shutdown) cancels the supervisors but never signals a task: the tasks
keep running, and the next daemon re-adopts them from their records.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import re
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import attrs
import trio

from hive._files import fsync_dir, open_regular
from hive._limits import NAME_RULE, is_name
from hive.bash import _cgroups, _limits, _procs
from hive.bash._batches import Batcher
from hive.bash._courier import WakeCourier
from hive.bash._describe import wake_body
from hive.bash._errors import BadArgument, DiskError, NameBusy, TaskLimit, UnknownTask
from hive.bash._model import Event, Exited, HeldBy, Spawned, StopBegun, StopReason, advance
from hive.bash._records import LooseEnd, OwedWake, TaskRecord
from hive.bash._recovery import recover
from hive.bash._stopping import FILLED_UP, FSIZE_MARGIN, Stopper
from hive.bash._store import Tail, TaskStore, read_tail
from hive.wake import Wake, end_id

log = logging.getLogger(__name__)

WAKE_STDOUT_BYTES = 2048
SPAWN_LANES = 8
SPAWNS_PER_TRIP = 8
LAST_SYNC_SECS = 10.0
"""How long an orderly stop may spend making the last ends durable."""


@attrs.frozen
class TaskSettings:
    workdir: Path
    kill_grace: float = 10.0
    max_output_bytes: int = 5 * 1024**3
    output_check_interval: float = 1.0
    reap_orphans: bool = False
    """The daemon is the child subreaper: reap the orphans re-parented to it (see `_procs`)."""
    cgroup_parent: Path | None = None
    """Where each task gets a cgroup of its own (see `_cgroups`); None: the subreaper and the
    tag hold the tasks."""

    def cgroup_of(self, record: TaskRecord) -> Path | None:
        """The task's cgroup, if one holds it."""
        if self.cgroup_parent is None or record.held_by is not HeldBy.CGROUP:
            return None
        return self.cgroup_parent / record.serial


@attrs.define(eq=False)
class Task:
    """A task the daemon knows, with the in-memory state that its record does not hold."""

    record: TaskRecord
    ended: trio.Event = attrs.field(factory=trio.Event)
    exited: trio.Event = attrs.field(factory=trio.Event)
    recorded: trio.Event = attrs.field(factory=trio.Event)
    """Set once its final record is written (not yet fsynced: see `TaskManager._sync_ends`),
    or its failure to be is noted."""
    owed: bool = False
    """The agent must be told the end: from the task's start until an answer carrying its final
    state was written to a client still connected, or its wake was acknowledged."""
    waiters: int = 0
    """Callers waiting to answer with the end inline (see `hold`): its wake waits for them."""
    supervisor: trio.Nursery | None = None
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    record_dirty: bool = False
    loose_end_lock: trio.Lock = attrs.field(factory=trio.Lock)
    saved_loose_end: LooseEnd | None = None
    """This run's loose end as last saved (None: not on disk, or deleted since)."""
    wake_queued: bool = False
    owed_wake: OwedWake | None = None
    """The wake for this task's end, composed once when it ends."""
    earlier: bool = False
    """A later run took its name while its end was owed: its loose end has a path of its own."""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def final(self) -> bool:
        return self.record.state.final


@attrs.define(eq=False)
class TaskManager:
    store: TaskStore
    settings: TaskSettings
    courier: WakeCourier
    tasks: dict[str, Task] = attrs.field(factory=dict)
    _nursery: trio.Nursery | None = None
    clock: Callable[[], float] = time.time
    stopper: Stopper = attrs.field(init=False, default=attrs.Factory(Stopper, takes_self=True))
    reads: Batcher = attrs.field(factory=Batcher)
    """Where the reads for answers and ends run (exit files, tails): many tasks' to a trip."""
    spawns: Batcher = attrs.field(factory=lambda: Batcher(lanes=SPAWN_LANES, per_trip=SPAWNS_PER_TRIP))
    """Where tasks are started (their files, record and loose end saved, the wrapper forked)."""
    writes: Batcher = attrs.field(factory=Batcher)
    """Where records and loose ends are saved and removed, apart from the reads, which an
    answer waits for."""
    _unsynced: dict[str, Task] = attrs.field(factory=dict)
    """Ended tasks (by serial) whose final record is not fsynced yet (see `_sync_ends`)."""
    _removed_unsynced: bool = False
    """Loose ends were removed since the directory was last fsynced (see `_sync_ends`)."""
    _earlier: dict[tuple[str, str], Task] = attrs.field(factory=dict)
    """Runs whose name a later run took while their end was owed, by id and serial."""

    # -- lifecycle ------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[TaskManager] = trio.TASK_STATUS_IGNORED) -> None:
        """Recover the tasks of earlier runs, then watch tasks until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.spawns.serve)
                await nursery.start(self.reads.serve)
                await nursery.start(self.writes.serve)
                await nursery.start(self.courier.run, self._on_acked)
                await recover(self)
                nursery.start_soon(self._watch_running)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            # An orderly stop leaves the ends it saw durable, and each owed one's wake in its
            # loose end (a crash leaves that to the next start's recovery).
            with trio.CancelScope(shield=True), trio.move_on_after(LAST_SYNC_SECS):
                await self._sync_ends()

    def supervise_soon(self, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
        """Watch a task until it ends; ``wait_exit`` returns when its wrapper has exited."""
        assert self._nursery is not None
        self._nursery.start_soon(self._supervise, task, wait_exit)

    def _register(self, task: Task) -> Task:
        self.tasks[task.id] = task
        return task

    def _wake_of(self, task: Task) -> OwedWake:
        """The wake for a task's end. It is composed as the task ends (`_finish`) or is settled
        (`_sync_loose_end`), its tail read in a worker thread; composing it here, on the loop,
        is the fallback for a final task that came by neither."""
        if task.owed_wake is None:
            task.owed_wake = self.compose_wake(task.record)
        return task.owed_wake

    def compose_wake(self, record: TaskRecord) -> OwedWake:
        """The wake for a task's end: its state, exit code and last stdout lines (blocking: reads them)."""
        return _wake(record, self._wake_tail(record.id))

    def _wake_tail(self, task_id: str) -> str:
        return read_tail(self.store.out_path(task_id), WAKE_STDOUT_BYTES).text

    async def output_tails(self, task_id: str) -> tuple[Tail, Tail]:
        """The last 4 KiB of a task's stdout and stderr, read in a worker thread."""
        store = self.store
        return await self.reads.run(
            lambda: (read_tail(store.out_path(task_id)), read_tail(store.err_path(task_id)))
        )

    # -- queries --------------------------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        task = self.tasks.get(task_id)
        if task is None:
            raise UnknownTask(
                f"no task has id {task_id!r}; `run` returns the id (or use the name you gave it), "
                "and `list` shows every known task"
            )
        return task

    def newest_first(self) -> list[TaskRecord]:
        return sorted((t.record for t in self.tasks.values()), key=lambda r: r.created_at, reverse=True)

    # -- run ------------------------------------------------------------------------------------

    async def start(
        self, cmd: str, *, name: str | None = None, timeout_secs: float | None = None
    ) -> tuple[Task, Task | None]:
        """Start a task; returns it and, if a name was reused, the previous task when its end
        had not reached the agent yet. The caller holds both: its answer reports the previous
        end too, and releases the previous task as told only if it reached a connected client."""
        if name is not None:
            if not is_name(name):
                raise BadArgument(f"bad name {name!r}: use {NAME_RULE}")
            task_id = name
        else:
            task_id = secrets.token_hex(6)
            while task_id in self.tasks:
                task_id = secrets.token_hex(6)
        previous = self.tasks.get(task_id)
        if previous is not None and not previous.final:
            raise NameBusy(
                f"name {task_id!r} is held by a task that is still {previous.record.state.value}; "
                f"wait for it (status({task_id!r}, wait_seconds=30)), stop it (stop({task_id!r})), "
                "or choose another name"
            )
        record = TaskRecord(
            id=task_id,
            serial=secrets.token_hex(8),
            cmd=cmd,
            cwd=str(self.settings.workdir),
            created_at=self.clock(),
            named=name is not None,
            timeout_secs=timeout_secs,
        )
        # Registered before anything awaits: the name is held from here on. Its end is owed
        # from the start, and the caller holds it (it may yet tell the end inline).
        task = self._register(Task(record, owed=True, waiters=1))
        unreported = None
        try:
            if previous is not None:
                if previous.owed:
                    # Still owed, on its own: this run's loose end must not replace its.
                    self.hold(previous)
                    unreported = previous
                    await self._set_aside(previous)
                # Its last state on disk before its files are moved aside for this run (see `_spawn`).
                await self._persist(previous)
            loose_end = self._loose_end_of(task)
            child, held_by = await self.spawns.run(self._spawn, record, loose_end)
        except BaseException:
            self._forget(task, previous)
            if unreported is not None:
                self.release(unreported, told=False)
            raise
        # Its record and loose end were saved before its process started; its pid is saved
        # later (at its end, or by the timer). A daemon that dies before that finds it by its
        # wrapper's mark (see `_recovery`).
        task.saved_loose_end = loose_end
        self._apply(task, Spawned(), started_at=self.clock(), pid=child.pid, held_by=held_by)
        assert self._nursery is not None
        self._nursery.start_soon(self._supervise, task, child.wait)
        return task, unreported

    def _spawn(self, record: TaskRecord, loose_end: LooseEnd) -> tuple[_procs.Child, HeldBy]:
        """Create the task's files, an earlier run's moved aside, save its record and loose end,
        make its cgroup (where one can be made) and start it in it (blocking: run in a worker
        thread); the child and what holds it. A file that cannot be written is a
        :class:`DiskError`; a process that cannot be started, a :class:`~hive.bash._procs.SpawnError`.
        Either way nothing is left on disk, and nothing ran."""
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
            with store.new_run(record.id, record.cmd.encode()) as files, self._unsaved_unless_started(record):
                # On disk before the process starts, so that no crash of the daemon can lose a
                # task that ran; not fsynced (see `_recovery` for what a power loss keeps).
                store.save_record(record, durable=False)
                store.save_loose_end(loose_end, durable=False)
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
        """The task's own cgroup, made now: its ``cgroup.procs`` open for the wrapper to enter.
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
            with contextlib.suppress(OSError):
                self.store.delete_record(record.id)
            with contextlib.suppress(OSError):
                self.store.delete_loose_end(record.id, record.serial)
            raise

    def _forget(self, task: Task, previous: Task | None) -> None:
        if previous is not None:
            self.tasks[task.id] = previous
        else:
            self.tasks.pop(task.id, None)

    # -- state changes --------------------------------------------------------------------------

    def _apply(self, task: Task, event: Event | None = None, **changes: object) -> None:
        record = task.record
        if event is not None:
            phase = advance(record.phase, event)
            changes["state"] = phase.state
            changes["stop_reason"] = phase.stop_reason
        task.record = attrs.evolve(record, **changes)  # type: ignore[arg-type]
        task.record_dirty = True

    def _note(self, task: Task, note: str) -> None:
        if note not in task.record.notes:
            self._apply(task, notes=(*task.record.notes, note))

    async def _persist(self, task: Task, *, durable: bool = True) -> None:
        """Bring the record on disk up to date; a failing disk becomes a note on the task.

        Not ``durable``: not fsynced now (the caller sees to it later, see `_sync_ends`).
        """
        async with task.write_lock:
            if not task.record_dirty:
                return
            task.record_dirty = False
            # A note that an earlier save failed is not true of the record that gets saved.
            record = _without_unsaved_notes(task.record)
            try:
                await self.writes.run(self.store.save_record, record, durable=durable)
            except OSError as exc:
                task.record_dirty = True
                log.warning("cannot save the record of task %s: %s", task.id, exc)
                self._note(task, _disk_note("its record", exc))
            else:
                task.record = _without_unsaved_notes(task.record)

    async def _set_aside(self, task: Task) -> None:
        """Move the owed loose end of ``task`` (ended: its name is being reused) to a path of its
        own, with its wake, durably. A disk that cannot take it refuses the new run."""
        async with task.loose_end_lock:
            if task.owed_wake is None:
                task.owed_wake = _wake(task.record, await self.reads.run(self._wake_tail, task.id))
            loose_end = self._loose_end_of(task)
            try:
                await self.writes.run(self.store.set_aside_loose_end, loose_end)
            except OSError as exc:
                raise DiskError(
                    f"cannot keep the unreported end of the previous task named {task.id} "
                    f"({exc.strerror or exc}); nothing ran. Ask status({task.id!r}) first, or free space "
                    f"in {self.store.loose_ends_dir}"
                ) from None
            task.earlier = True
            task.saved_loose_end = loose_end
            self._earlier[task.id, task.record.serial] = task

    def _loose_end_of(self, task: Task) -> LooseEnd:
        record = task.record
        return LooseEnd(
            task_id=record.id,
            serial=record.serial,
            cmd=record.cmd,
            since=record.created_at,
            wake=self._wake_of(task) if task.final else None,
        )

    async def _sync_loose_end(self, task: Task, *, durable: bool = True) -> None:
        """Make the loose end on disk match whether the agent is still owed this task's end
        (with its wake, once it has ended). Not ``durable``: not fsynced now."""
        async with task.loose_end_lock:
            record = task.record
            store = self.store
            try:
                if task.owed:
                    if task.final and task.owed_wake is None:
                        task.owed_wake = _wake(record, await self.reads.run(self._wake_tail, record.id))
                    loose_end = self._loose_end_of(task)
                    await self.writes.run(
                        store.save_loose_end, loose_end, earlier=task.earlier, durable=durable
                    )
                    task.saved_loose_end = loose_end
                else:
                    self._removed_unsynced = True
                    await self.writes.run(store.delete_loose_end, record.id, record.serial, durable=False)
                    task.saved_loose_end = None
            except OSError as exc:
                log.warning("cannot update the loose end of task %s: %s", task.id, exc)
                self._note(task, _disk_note("its loose end", exc))

    def hold(self, task: Task) -> None:
        """A caller (`status`, `stop`) waits to answer with the task's end: its wake waits for it.

        (`start` holds the task it returns for its caller.) Every hold is ended by `release`.
        """
        task.waiters += 1

    def release(self, task: Task, *, told: bool) -> None:
        """The caller that held ``task`` is done. ``told``: an answer carrying the final state
        was written to a client still connected, so the agent has seen the end. Otherwise an
        end that is still owed goes out as a wake once no other caller holds it."""
        task.waiters -= 1
        if told and task.final:
            if task.owed:
                task.owed = False
                self._earlier.pop((task.id, task.record.serial), None)
                self.courier.withdraw((task.id, task.record.serial))
                assert self._nursery is not None
                self._nursery.start_soon(self._sync_loose_end, task)
        elif task.owed and task.final and task.waiters == 0:
            self._send_wake(task)

    async def told(self, task: Task) -> None:
        """The agent has seen the final state (a `status` answer): no wake is owed any more."""
        if not task.owed:
            return
        task.owed = False
        self._earlier.pop((task.id, task.record.serial), None)
        self.courier.withdraw((task.id, task.record.serial))
        await self._sync_loose_end(task)

    def _send_wake(self, task: Task) -> None:
        # Once per task: `run` owing an end and the end itself can both get here.
        if task.wake_queued:
            return
        task.wake_queued = True
        wake = self._wake_of(task)
        serial = task.record.serial
        self.courier.enqueue(
            task.id, serial, Wake(sender=wake.sender, body=wake.body, end_id=end_id(task.id, serial))
        )

    async def _on_acked(self, key: tuple[str, str]) -> None:
        task_id, serial = key
        task = self.tasks.get(task_id)
        if task is None or task.record.serial != serial:
            task = self._earlier.pop((task_id, serial), None)
        if task is not None:
            task.owed = False
            await self._sync_loose_end(task)
        else:
            self._removed_unsynced = True
            await self.writes.run(self.store.delete_loose_end, task_id, serial, durable=False)

    # -- waiting --------------------------------------------------------------------------------

    async def wait(self, task: Task, seconds: float) -> None:
        if seconds > 0 and not task.final:
            with trio.move_on_after(seconds):
                await task.ended.wait()

    # -- supervision ----------------------------------------------------------------------------

    async def _supervise(self, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
        # The outer nursery holds a stop sequence, which outlives the wrapper's exit (lingering
        # members of the group still get their grace); the deadline ends with the wrapper.
        async with trio.open_nursery() as stoppers:
            task.supervisor = stoppers
            if task.record.stop_reason is not None:
                # A stop was under way when the previous daemon went down: finish it.
                if task.record.stop_started_at is None:
                    self._apply(task, stop_started_at=self.clock())
                stoppers.start_soon(self.stopper.finish, task)
            timeout = task.record.timeout_secs
            deadline = trio.CancelScope()
            if timeout is not None:
                stoppers.start_soon(self.stopper.deadline, task, timeout, deadline)
            returncode = await wait_exit()
            task.exited.set()
            deadline.cancel()
        task.supervisor = None
        await self._finish(task, returncode)
        self.stopper.ended(task)

    async def _watch_running(self) -> None:
        """Every interval: check the running tasks (the output cap, the disk) and what ended
        tasks left behind (see `Stopper.survey`), and save the records that changed.

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
                    self._nursery.start_soon(self._persist, task)

    def request_stop(self, task: Task) -> bool:
        """Begin stopping a running task; False if it is not running or already stopping."""
        return self.stopper.request(task)

    async def _finish(self, task: Task, returncode: int | None) -> None:
        store = self.store
        task_id = task.id

        def read_end() -> tuple[int | None, bool, str, int]:
            return (
                store.read_exit_status(task_id),
                store.has_space(),
                self._wake_tail(task_id),
                store.output_size(task_id),
            )

        exit_code, has_space, stdout, size = await self.reads.run(read_end)
        if not has_space:
            self._note(task, FILLED_UP.format(store.tasks_dir))
        cap = self.settings.max_output_bytes
        if size > cap and task.record.stop_reason is None:
            # Past the cap before a check saw it: its writer met the file size limit (SIGXFSZ,
            # see `_procs.WRAPPER`), and the task ended of that. Stopped for the cap, as a
            # check would have stopped it.
            self._note(task, f"its output reached {size} bytes, over the cap of {cap} bytes")
            self._note(
                task,
                f"its writer met the file size limit ({cap + FSIZE_MARGIN} bytes a file) before a "
                "check stopped it",
            )
            self._apply(task, StopBegun(StopReason.OUTPUT_CAP), stop_started_at=self.clock())
        if exit_code is None:
            exit_code = self._exit_without_file(task, returncode)
        self._apply(task, Exited(), exit_code=exit_code, ended_at=self.clock())
        task.owed_wake = _wake(task.record, stdout)
        task.ended.set()
        if task.owed and not task.waiters:
            # Sent before the saves: if the daemon dies before they land, the loose end that
            # already exists still owes the end, so the wake is sent again (at least once).
            self._send_wake(task)
        if task.owed and task.saved_loose_end is None:
            # The loose end before the final record: a crash between the two leaves the end
            # owed, where the other order would leave it forgotten.
            await self._sync_loose_end(task)
        # The loose end saved as the task started still owes the end (a restarted daemon
        # composes the wake from the final record), so this record is written at once and
        # the rest waits for `_sync_ends`: most ends are told within moments (an answer, an
        # acknowledged wake), and their loose end is then removed, not rewritten.
        await self._persist(task, durable=False)
        self._unsynced[task.record.serial] = task
        task.recorded.set()

    def _exit_without_file(self, task: Task, returncode: int | None) -> int | None:
        """The exit code of a task whose `.exit` holds no status, and a note on why it has none."""
        if returncode is not None and returncode < 0:
            self._note(task, f"its wrapper shell was killed by {signal.Signals(-returncode).name}")
            return None
        if returncode is not None:
            # The wrapper exits with the command's status: only the file was lost.
            self._note(
                task,
                "its wrapper shell could not write the .exit file; the exit code is the one the "
                "wrapper exited with",
            )
            return returncode
        # Re-adopted after a restart: this daemon is not the wrapper's parent, and never saw
        # how it exited.
        if "SIGKILL" in task.record.signals:
            self._note(
                task, "it left no exit status: its wrapper shell was killed (SIGKILL) before writing one"
            )
        elif task.record.stop_reason is not None:
            self._note(
                task,
                "it left no exit status: its wrapper shell ended during the stop without writing one "
                "(it was re-adopted after a daemon restart, so how it ended is not known)",
            )
        else:
            self._note(
                task,
                "it left no exit status: its wrapper shell ended without writing one (it was "
                "re-adopted after a daemon restart, so how it ended is not known)",
            )
        return None

    async def _sync_ends(self) -> None:
        """Make the ends since the last interval durable: the final records fsynced, the loose
        end of each end still owed rewritten with its wake and fsynced, and the removals of
        the loose ends of ends told, in one worker trip for all of them (on a journalled file
        system the first fsync commits the rest). A removal lost to a power loss is an end
        told twice, never one lost.
        """
        ended = [t for t in self._unsynced.values() if self.tasks.get(t.id) is t]
        self._unsynced.clear()
        owed = [
            t for t in ended if t.owed and t.saved_loose_end is not None and t.saved_loose_end.wake is None
        ]
        async with trio.open_nursery() as nursery:
            for task in owed:
                nursery.start_soon(functools.partial(self._sync_loose_end, task, durable=False))
        store = self.store
        paths = [store.record_path(t.id) for t in ended]
        paths += [
            store.loose_end_path(t.id, t.record.serial if t.earlier else None)
            for t in owed
            if t.owed and t.saved_loose_end is not None
        ]
        removed, self._removed_unsynced = self._removed_unsynced, False
        if paths or removed:
            await self.writes.run(_make_durable, paths, store.loose_ends_dir if removed else None)


def _wake(record: TaskRecord, stdout: str) -> OwedWake:
    return OwedWake(sender=f"bash-task-{record.id}", body=wake_body(record, stdout))


def _make_durable(paths: list[Path], directory: Path | None) -> None:
    """fsync each of these regular files that is there (a symlink planted there is not
    followed), and then ``directory``, if given."""
    for path in paths:
        try:
            fd = open_regular(path)
        except OSError as exc:
            log.warning("cannot make %s durable: %s", path, exc)
            continue
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:
                log.warning("cannot make %s durable: %s", path, exc)
            finally:
                os.close(fd)
    if directory is not None:
        try:
            fsync_dir(directory)
        except OSError as exc:
            log.warning("cannot make the removals in %s durable: %s", directory, exc)


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


_UNSAVED_RECORD = re.compile(r"(?:the disk is full: )?its record could not be saved\b")


def _without_unsaved_notes(record: TaskRecord) -> TaskRecord:
    """The record without the notes that its saving failed (see `_disk_note`)."""
    notes = tuple(n for n in record.notes if not _UNSAVED_RECORD.match(n))
    return record if notes == record.notes else attrs.evolve(record, notes=notes)


def _disk_note(what: str, exc: OSError) -> str:
    fds = _limits.out_of_descriptors(exc)
    if fds is not None:
        return f"{what} could not be saved: {fds}; it is kept in memory"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full: {what} could not be saved ({exc.strerror}); it is kept in memory"
    return f"{what} could not be saved ({exc}); it is kept in memory"
