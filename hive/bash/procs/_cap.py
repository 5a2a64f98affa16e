"""The output cap: a task's stdout and stderr together, checked as they grow, woken by inotify
(`hive.bash.procs._growth`), from its start until it ended and nothing of it is left.

A task whose output passes the cap is stopped (SIGINT, then the grace), and once it is
`CAP_MARGIN` past the cap, whatever stage its stop is at, every process of it gets SIGKILL at
once. Far from the cap a task is looked at no sooner than its writers could have reached it at
`OUTPUT_RATE`, so that a task writing all along costs few checks. The kernel holds each file as
a backstop, also while no daemon runs: every process of a task has RLIMIT_FSIZE at the cap plus
`FSIZE_MARGIN` (see `hive.bash.procs._procs.WRAPPER`), and a writer that meets it gets SIGXFSZ (or
EFBIG). A task ended so is recorded as stopped at the output cap too (see `ended_past`).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import attrs
import trio

from hive import _proc
from hive.bash._model import StopBegun, StopReason
from hive.bash._task import Task
from hive.bash.files._store import TaskStore
from hive.bash.procs._growth import GrowthWatch

if TYPE_CHECKING:
    from hive.bash.procs._stopping import Stopper

CAP_MARGIN = 1024**2
"""How far past the output cap a task's output may grow before every process of it gets SIGKILL
without waiting out the grace of its stop: the grace is for processes that end, and a writer
that ignores SIGINT would go on writing in it."""
FSIZE_MARGIN = 4 * 1024**2
"""How far past the output cap a file of a task may grow (RLIMIT_FSIZE, in every process of the
task); a process that writes past it gets SIGXFSZ (or EFBIG)."""
OUTPUT_RATE = 16 * 1024**3
"""Bytes a second that a task's output files take at most: writes to one file take its inode's
lock in turn, so the two of them grow about as fast as two cores copy memory, at most."""


def _output_sizes(store: TaskStore, task_ids: list[str]) -> list[int]:
    return [store.output_size(task_id) for task_id in task_ids]


@attrs.define(eq=False)
class OutputCap:
    """Holds the tasks of a :class:`~hive.bash.procs._stopping.Stopper` to the output cap, by its stops."""

    stopper: Stopper
    _growth: GrowthWatch = attrs.field(factory=GrowthWatch)
    _watched: dict[str, Task] = attrs.field(factory=dict)
    """Serial -> a task whose output is checked as it grows (see `watch`)."""
    _look_by: dict[str, float] = attrs.field(factory=dict)
    """Serial -> the earliest (Trio) time the task's writers could have reached the cap."""
    _killing: set[str] = attrs.field(factory=set)
    """Tasks past the cap and its margin whose SIGKILL is under way."""
    _spacing: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The wait before the next look at the watched tasks: a task newly watched ends it."""

    @property
    def watched(self) -> list[Task]:
        return list(self._watched.values())

    def watch(self, task: Task) -> None:
        """Check the output of this task (which runs, or may have processes left) as it grows,
        until it ended and nothing of it is left."""
        serial = task.record.serial
        if serial in self._watched:
            return
        self._watched[serial] = task
        store = self.stopper.ledger.store
        self._growth.add(serial, (store.out_path(task.id), store.err_path(task.id)))
        self._spacing.cancel()

    def unwatch(self, serial: str) -> None:
        self._watched.pop(serial, None)
        self._look_by.pop(serial, None)
        self._growth.remove(serial)

    async def run(self) -> None:
        """Check the output of the watched tasks whose files were written, as they are; a task
        far from the cap no sooner than its writers could reach it. Until cancelled."""
        stopper = self.stopper
        cap = stopper.settings.max_output_bytes
        try:
            while True:
                changed = await self._growth.changed()
                # A later run of the name has the paths of an ended one: the survey looks after that.
                tasks = [
                    t
                    for serial in changed
                    if (t := self._watched.get(serial)) is not None and stopper.tasks.get(t.id) is t
                ]
                if tasks:
                    store = stopper.ledger.store
                    sizes = await trio.to_thread.run_sync(_output_sizes, store, [t.id for t in tasks])
                    now = trio.current_time()
                    for task, size in zip(tasks, sizes, strict=True):
                        if task.record.serial in self._watched:
                            self._look_by[task.record.serial] = now + max(0, cap - size) / OUTPUT_RATE
                            self.check(task, size)
                if self._look_by:
                    latest = trio.current_time() + stopper.settings.output_check_interval
                    with trio.CancelScope(deadline=min(latest, *self._look_by.values())) as self._spacing:
                        await trio.sleep_forever()
        finally:
            self._growth.close()

    def check(self, task: Task, size: int) -> None:
        """A running task past the cap is stopped; one past the cap and `CAP_MARGIN`, whatever
        of it is left gets SIGKILL at once (also what an ended task left behind)."""
        stopper = self.stopper
        cap = stopper.settings.max_output_bytes
        if size <= cap:
            return
        serial = task.record.serial
        running = task.supervisor is not None and not task.exited.is_set()
        if running and task.record.stop_reason is None:
            stopper.ledger.note(task, f"its output reached {size} bytes, over the cap of {cap} bytes")
            stopper.begin(task, StopReason.OUTPUT_CAP)
        alive = task.supervisor is not None or stopper.lingering(serial)
        # The daemon is stopping: it signals nothing on its way down.
        if size > cap + CAP_MARGIN and alive and serial not in self._killing and not stopper.stopping:
            self._killing.add(serial)
            pgid = task.record.pid
            # The group at once, on the loop (its leader is not reaped yet); the rest (escaped
            # processes, or the cgroup) in `_kill_past`.
            if running and pgid is not None and _proc.signal_group(pgid, signal.SIGKILL):
                stopper.signalled(task, "SIGKILL")
            stopper.soon(self._kill_past, task, size)

    async def _kill_past(self, task: Task, size: int) -> None:
        stopper = self.stopper
        cap = stopper.settings.max_output_bytes
        try:
            if task.supervisor is not None:
                stopper.ledger.note(
                    task,
                    f"its output went on to {size} bytes, more than {CAP_MARGIN} bytes past the cap of "
                    f"{cap} bytes, so SIGKILL came without waiting out the grace",
                )
            await stopper.kill(
                task, f"as its output passed the cap by {size - cap} bytes", by_group=not task.exited.is_set()
            )
        finally:
            self._killing.discard(task.record.serial)

    def ended_past(self, task: Task, size: int, how: str) -> None:
        """A task that ended with its output past the cap, and no stop under way, is recorded
        stopped at the cap, as a check would have stopped it; ``how`` it got there unchecked
        (``it ended before a check stopped it``, ...) is in its notes."""
        stopper = self.stopper
        cap = stopper.settings.max_output_bytes
        if size <= cap or task.record.stop_reason is not None:
            return
        stopper.ledger.note(task, f"its output reached {size} bytes, over the cap of {cap} bytes")
        stopper.ledger.note(
            task,
            f"{how}; until a check comes, the file size limit holds each of its files "
            f"({cap + FSIZE_MARGIN} bytes), and a writer that meets it dies of SIGXFSZ",
        )
        stopper.ledger.change(task, StopBegun(StopReason.OUTPUT_CAP), stop_started_at=stopper.clock())
