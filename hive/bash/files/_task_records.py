"""The task records on disk: each changed in memory, then saved; a disk that refuses one leaves
a note on the task and the record kept in memory, to be saved at the next change.

A record saved without fsync (the ends of many tasks at once) is made durable later, with the
loose ends of the same interval, in one worker trip (`hive.bash.files._durable.make_durable`).
"""

from __future__ import annotations

import errno
import logging
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from hive.bash._batches import Batcher
from hive.bash._model import Event as TaskEvent
from hive.bash._model import advance
from hive.bash._task import Task
from hive.bash.files._records import TaskRecord
from hive.bash.files._store import TaskStore
from hive.bash.procs import _limits

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class TaskRecords:
    """The records of the tasks, changed in memory and saved through the store."""

    store: TaskStore
    writes: Batcher
    """Where records (and loose ends) are saved and removed."""
    _unsynced: dict[str, Task] = attrs.field(factory=dict, init=False)
    """Ended tasks (by serial) whose final record is not fsynced yet (see `unsynced_records`)."""

    def change(self, task: Task, event: TaskEvent | None = None, **changes: object) -> None:
        """Change the task's record in memory (``event`` moves its state); saved by `save`."""
        record = task.record
        if event is not None:
            phase = advance(record.phase, event)
            changes["state"] = phase.state
            changes["stop_reason"] = phase.stop_reason
        task.record = attrs.evolve(record, **changes)  # type: ignore[arg-type]
        task.record_dirty = True

    def note(self, task: Task, note: str) -> None:
        if note not in task.record.notes:
            self.change(task, notes=(*task.record.notes, note))

    def may_save(self, task: Task) -> bool:
        """Whether the task's record may be saved as it is now (it stays to be saved if not)."""
        return True

    async def save(self, task: Task, *, durable: bool = True) -> None:
        """Bring the record on disk up to date, if `may_save` allows it; a failing disk becomes
        a note on the task. Not ``durable``: not fsynced now (see `recorded_end`)."""
        async with task.write_lock:
            if not task.record_dirty or not self.may_save(task):
                return
            task.record_dirty = False
            # A note that an earlier save failed is not true of the record that gets saved.
            record = _without_unsaved_notes(task.record)
            try:
                await self.writes.run(self.store.save_record, record, durable=durable)
            except OSError as exc:
                task.record_dirty = True
                log.warning("cannot save the record of task %s: %s", task.id, exc)
                self.note(task, disk_note("its record", exc))
            else:
                task.record = _without_unsaved_notes(task.record)

    def recorded_end(self, task: Task) -> None:
        """The task's final record was saved without fsync: it is among the `unsynced_records`."""
        self._unsynced[task.record.serial] = task

    def unsynced_records(self, current: Mapping[str, Task]) -> list[Path]:
        """The paths of the final records saved without fsync since the last call, of the tasks
        still ``current`` by id (a record replaced by a later run's is not this one's to sync)."""
        ended = [t for t in self._unsynced.values() if current.get(t.id) is t]
        self._unsynced.clear()
        return [self.store.record_path(t.id) for t in ended]


_UNSAVED_RECORD = re.compile(r"(?:the disk is full: )?its record could not be saved\b")


def _without_unsaved_notes(record: TaskRecord) -> TaskRecord:
    """The record without the notes that its saving failed (see `disk_note`)."""
    notes = tuple(n for n in record.notes if not _UNSAVED_RECORD.match(n))
    return record if notes == record.notes else attrs.evolve(record, notes=notes)


def disk_note(what: str, exc: OSError) -> str:
    """The note on a task that ``what`` (``its record``, ``its loose end``) could not be saved."""
    fds = _limits.out_of_descriptors(exc)
    if fds is not None:
        return f"{what} could not be saved: {fds}; it is kept in memory"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full: {what} could not be saved ({exc.strerror}); it is kept in memory"
    return f"{what} could not be saved ({exc}); it is kept in memory"
