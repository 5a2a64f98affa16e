"""A task's run, supervised until it ends, and its end: how it exited (from its `.exit` file, or
why there is none), its final record, and the end owed to the agent. A task that waited for a
place to run starts here when its turn comes, or ends here unstarted."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from hive import telemetry
from hive.bash._errors import BashError
from hive.bash._model import Event, Exited, Spawned, Vanished, Withdrawn
from hive.bash._settings import TaskSettings
from hive.bash._task import Task
from hive.bash.ends._ledger import Ledger, wake_for
from hive.bash.files._store import ExitStatus
from hive.bash.procs._cap import FSIZE_MARGIN
from hive.bash.procs._stopping import FILLED_UP

if TYPE_CHECKING:
    from hive.bash._task_manager import TaskManager


async def supervise(manager: TaskManager, task: Task, wait_exit: Callable[[], Awaitable[int | None]]) -> None:
    """Watch a running task until it ends (``wait_exit`` returns once its wrapper has exited),
    and record its end."""
    # The outer nursery holds a stop sequence, which outlives the wrapper's exit (lingering
    # members of the group still get their grace); the deadline ends with the wrapper.
    if task.trace is None:
        task.trace = telemetry.task_started(task.id, task.record.started_at or manager.clock(), task.parent)
    async with trio.open_nursery() as stoppers:
        task.supervisor = stoppers
        manager.stopper.cap.watch(task)
        if task.record.stop_reason is not None:
            # A stop was under way when the previous daemon went down: finish it.
            if task.record.stop_started_at is None:
                manager.ledger.change(task, stop_started_at=manager.clock())
            stoppers.start_soon(manager.stopper.finish, task)
        deadline = trio.CancelScope()
        if task.record.timeout_secs is not None:
            stoppers.start_soon(manager.stopper.deadline, task, deadline)
        returncode = await wait_exit()
        task.exited.set()
        deadline.cancel()
        manager.line.vacate(task.key)
        manager.start_due()
    task.supervisor = None
    await _finish(manager, task, returncode)
    manager.stopper.ended(task)


async def launch(manager: TaskManager, task: Task) -> None:
    """Start a task whose turn has come (its place to run is taken); one that cannot be
    started ends ``interrupted``, saying why, and its place goes to the next."""
    record = attrs.evolve(task.record, queued=None, started_at=manager.clock())
    try:
        child, held_by = await manager.spawns.run(manager.spawner.start_waiting, record)
    except (BashError, OSError) as exc:
        manager.line.vacate(task.key)
        manager.start_due()
        await _end_unstarted(manager, task, Vanished(), f"it could not be started when its turn came: {exc}")
        return
    manager.ledger.change(
        task, Spawned(), queued=None, started_at=record.started_at, pid=child.pid, held_by=held_by
    )
    assert manager.nursery is not None
    manager.nursery.start_soon(supervise, manager, task, child.wait)


async def withdraw(manager: TaskManager, task: Task) -> None:
    """End a task taken out of the line by a stop: it never ran."""
    await _end_unstarted(
        manager, task, Withdrawn(), "it was stopped while it waited for a place to run: it never ran"
    )


async def _finish(manager: TaskManager, task: Task, returncode: int | None) -> None:
    """Record the end of a task whose wrapper has exited (``returncode``: its status, where this
    daemon is its parent)."""
    store = manager.store
    task_id = task.id

    def read_end() -> tuple[ExitStatus | None, bool, str, int]:
        return (
            store.read_exit_status(task_id),
            store.has_space(),
            manager.wake_tail(task_id),
            store.output_size(task_id),
        )

    written, has_space, stdout, size = await manager.reads.run(read_end)
    ledger = manager.ledger
    if not has_space:
        ledger.note(task, FILLED_UP.format(store.tasks_dir))
    # Past the cap before a check saw it: it ended by itself, or its writers met the file
    # size limit (SIGXFSZ, see `_procs.WRAPPER`) and it ended of that.
    manager.stopper.cap.ended_past(task, size, "it ended before a check stopped it")
    exit_code = (
        _exit_without_file(ledger, manager.settings, task, returncode) if written is None else written.code
    )
    # The end is when the wrapper wrote the status (its last act), not when this daemon got
    # to it: on a loaded machine that is 100 ms and more later.
    # (A file's time is the kernel's coarse clock, up to a tick behind: never before the start.)
    now = manager.clock()
    ended_at = now if written is None else max(min(written.written_at, now), task.record.started_at or 0.0)
    ledger.change(task, Exited(), exit_code=exit_code, ended_at=ended_at)
    await _record_end(manager, task, stdout)


async def _end_unstarted(manager: TaskManager, task: Task, event: Event, note: str) -> None:
    """End a task that never ran (``event``: why), saying so in its notes."""
    manager.ledger.change(task, event, ended_at=manager.clock())
    manager.ledger.note(task, note)
    task.exited.set()
    await _record_end(manager, task, "")


async def _record_end(manager: TaskManager, task: Task, stdout: str) -> None:
    """Tell the ledger of the task's end (its record changed already); ``stdout``: the tail
    its wake carries."""
    ledger = manager.ledger
    record = task.record
    ended_at = record.ended_at or manager.clock()
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
    # the rest waits for `Ledger.sync_ends`: most ends are told within moments (an answer,
    # an acknowledged wake), and their loose end is then removed, not rewritten.
    await ledger.save(task, durable=False)
    ledger.recorded_end(task)
    task.recorded.set()


def _exit_without_file(
    ledger: Ledger, settings: TaskSettings, task: Task, returncode: int | None
) -> int | None:
    """The exit code of a task whose `.exit` holds no status, and a note on why it has none."""
    if returncode is not None and returncode < 0:
        killed_by = signal.Signals(-returncode)
        limit = ""
        if killed_by is signal.SIGXFSZ:
            limit = f" (it met the file size limit, {settings.max_output_bytes + FSIZE_MARGIN} bytes a file)"
        ledger.note(task, f"its wrapper shell was killed by {killed_by.name}{limit}")
        return None
    if returncode is not None:
        # The wrapper exits with the command's status: only the file was lost.
        ledger.note(
            task,
            "its wrapper shell could not write the .exit file; the exit code is the one the wrapper exited with",
        )
        return returncode
    # Re-adopted after a restart: this daemon is not the wrapper's parent, and never saw
    # how it exited.
    unknown = "(it was re-adopted after a daemon restart, so how it ended is not known)"
    if "SIGKILL" in task.record.signals:
        why = "its wrapper shell was killed (SIGKILL) before writing one"
    elif task.record.stop_reason is not None:
        why = f"its wrapper shell ended during the stop without writing one {unknown}"
    else:
        why = f"its wrapper shell ended without writing one {unknown}"
    ledger.note(task, f"it left no exit status: {why}")
    return None
