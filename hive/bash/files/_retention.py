"""Retention: which ended tasks' records and output the daemon removes, and when.

It owns pruning ``bash-tasks/``. A *run* is one task's files: the current run of an id
(``<id>.json``, ``.cmd``, ``.out``, ``.err``, ``.exit``) or an earlier run of a reused name
(``<id>.json.<n>``, ...). A run is pruned, oldest first, once it ended more than
``--retain-days`` ago, or while all runs together hold more than ``--retain-bytes``. Never
pruned: a run whose end is still owed to the agent (its loose end is in
``mcp-loose-ends/``, or it has not been delivered), a running task's, one whose processes
outlived it and are still watched, one a caller is waiting on, or one with a save still
to land. An earlier run's age is its newest file's time; a current run's, its end.

A pass runs at the daemon's start (before it answers) and every :attr:`Retention.interval`
after: the snapshot of the tasks is taken on the event loop, everything that touches the
disk runs in a worker thread, and :func:`choose` (pure) decides. A pruned task leaves the
manager's table before its files go, so `list` never shows it. Its record is removed last,
after its other files and a sync of the directory: a crash in between leaves a record with
no output, which `list` and `status` show as it was and the next pass prunes, never output
with no record (recovery would take that for a task whose record was lost).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from hive._when import counted
from hive.bash.files._store import StoredRun, TaskStore

if TYPE_CHECKING:
    from hive.bash._task_manager import Task, TaskManager

log = logging.getLogger(__name__)

DAY = 86400.0


@attrs.frozen
class Retention:
    max_age: float = 7 * DAY
    """Seconds after its end that a run is kept."""
    max_bytes: int | None = None
    """The most all runs together may hold; None for no limit."""
    interval: float = 600.0
    """Seconds between passes."""


@attrs.frozen
class Candidate:
    """One run, as :func:`choose` sees it."""

    task_id: str
    generation: int
    ended_at: float
    size: int
    protected: bool
    serial: str | None = None
    """The current run's serial (checked again before its files go); None for an earlier run."""


def choose(runs: Iterable[Candidate], *, now: float, retention: Retention) -> list[Candidate]:
    """The runs to prune, oldest first.

    Those not protected that ended ``max_age`` or more before ``now``; then, while all the
    runs together (protected ones included) hold more than ``max_bytes``, the oldest of
    those not protected that are left.
    """
    runs = list(runs)
    total = sum(r.size for r in runs)
    prunable = sorted(
        (r for r in runs if not r.protected), key=lambda r: (r.ended_at, r.task_id, r.generation)
    )
    cutoff = now - retention.max_age
    chosen: list[Candidate] = []
    for run in prunable:
        over = retention.max_bytes is not None and total > retention.max_bytes
        if run.ended_at > cutoff and not over:
            break
        chosen.append(run)
        total -= run.size
    return chosen


@attrs.frozen
class _Known:
    serial: str
    ended_at: float
    protected: bool


def _protected(manager: TaskManager, task: Task) -> bool:
    return (
        not task.final
        or manager.ledger.owes(task)
        or manager.ledger.held(task)
        or task.supervisor is not None
        or task.record_dirty
        or task.write_lock.locked()
        or manager.ledger.writing(task)
        or manager.stopper.watching(task)
    )


def _known(manager: TaskManager) -> dict[str, _Known]:
    """What the manager knows of each current run (on the loop: nothing here awaits)."""
    known = {}
    for task in manager.tasks.values():
        record = task.record
        ended = record.ended_at if record.ended_at is not None else record.created_at
        known[task.id] = _Known(record.serial, ended, _protected(manager, task))
    return known


def candidates(
    stored: Sequence[StoredRun], known: dict[str, _Known], owed_ids: set[str], watched_ids: set[str]
) -> list[Candidate]:
    """The runs on disk with what is known of them. A current run the manager does not know
    (a task starting as the listing was made, say) is protected, as is every run of an id with
    a loose end (current) or with processes still watched (any run: they may write its files)."""
    found = []
    for run in stored:
        watched = run.task_id in watched_ids
        if run.generation:
            found.append(Candidate(run.task_id, run.generation, run.mtime, run.size, watched))
            continue
        info = known.get(run.task_id)
        if info is None:
            found.append(Candidate(run.task_id, 0, run.mtime, run.size, True))
            continue
        protected = info.protected or watched or run.task_id in owed_ids
        found.append(Candidate(run.task_id, 0, info.ended_at, run.size, protected, info.serial))
    return found


@attrs.frozen
class PassReport:
    pruned: tuple[tuple[str, int], ...]
    """(task id, generation) of each run pruned."""
    freed: int


@attrs.define(eq=False)
class Pruner:
    """Runs the passes for one manager."""

    manager: TaskManager
    retention: Retention
    passes: int = 0
    last: PassReport | None = None
    _pass_done: trio.Event = attrs.field(factory=trio.Event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """A pass now, then one every interval, until cancelled."""
        await self.prune()
        task_status.started()
        while True:
            await trio.sleep(self.retention.interval)
            await self.prune()

    async def next_pass(self) -> PassReport:
        """Wait for the pass after the ones done so far; its report."""
        await self._pass_done.wait()
        assert self.last is not None
        return self.last

    async def prune(self) -> PassReport:
        manager = self.manager
        store = manager.store
        known = _known(manager)
        watched_ids = {t.id for t in manager.tasks.values() if manager.stopper.watching(t)}
        now = manager.clock()

        def listing() -> list[Candidate]:
            runs = candidates(store.stored_runs(), known, store.loose_end_ids(), watched_ids)
            return choose(runs, now=now, retention=self.retention)

        try:
            chosen = await trio.to_thread.run_sync(listing)
        except OSError as exc:
            log.warning("retention: cannot list %s: %s", store.tasks_dir, exc)
            chosen = []
        # Back on the loop: a current run goes only if its task is still the one the snapshot
        # saw and nothing claimed it since; it leaves the table before its files go.
        current = {r.task_id: r for r in chosen if not r.generation}
        for task_id, run in list(current.items()):
            task = manager.tasks.get(task_id)
            if task is None or task.record.serial != run.serial or _protected(manager, task):
                del current[task_id]
            else:
                del manager.tasks[task_id]
        going = [r for r in chosen if r.generation or r.task_id in current]
        freed, pruned = (await trio.to_thread.run_sync(_remove, store, going)) if going else (0, [])
        if pruned:
            log.info("retention: pruned %s (%s)", counted(len(pruned), "task run"), counted(freed, "byte"))
        report = PassReport(tuple(pruned), freed)
        self.passes += 1
        self.last = report
        done, self._pass_done = self._pass_done, trio.Event()
        done.set()
        return report


def _remove(store: TaskStore, runs: list[Candidate]) -> tuple[int, list[tuple[str, int]]]:
    """Remove the runs' files, then (after a sync of the directory) their records (blocking)."""
    freed = 0
    emptied = []
    for run in runs:
        gone = store.remove_run_files(run.task_id, run.generation, run.serial)
        if gone is not None:
            freed += gone
            emptied.append(run)
    if emptied:
        try:
            store.sync_tasks_dir()
        except OSError as exc:
            log.warning("retention: cannot sync %s: %s", store.tasks_dir, exc)
    for run in emptied:
        freed += store.remove_run_record(run.task_id, run.generation, run.serial)
    return freed, [(r.task_id, r.generation) for r in emptied]
