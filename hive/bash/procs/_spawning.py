"""Starting a task's process: its files made, its record and loose end saved, its cgroup made,
its wrapper forked. Everything here blocks: the task manager runs it in its spawn batcher's
worker threads."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import attrs

from hive.bash._errors import DiskError, TaskLimit
from hive.bash._model import HeldBy
from hive.bash._settings import TaskSettings
from hive.bash.ends._ledger import Ledger
from hive.bash.ends._watch import Watcher
from hive.bash.files._records import LooseEnd, TaskRecord
from hive.bash.files._store import TaskStore
from hive.bash.files._task_files import RunFiles
from hive.bash.procs import _cgroups, _limits, _procs
from hive.bash.procs._cap import FSIZE_MARGIN

log = logging.getLogger(__name__)

Started = tuple[_procs.Child, HeldBy]
"""The started wrapper, and what holds the task."""


@attrs.define(eq=False)
class Spawner:
    """Makes a task's files and starts its process; a file that cannot be written is a
    :class:`DiskError`, a process that cannot be started a :class:`~hive.bash.procs._procs.SpawnError`,
    and either way nothing is left on disk, and nothing ran."""

    store: TaskStore
    settings: TaskSettings
    ledger: Ledger
    watcher: Watcher

    def start(self, record: TaskRecord, loose_end: LooseEnd) -> Started:
        """Create the task's files, an earlier run's moved aside, save its record and loose end,
        make its cgroup (where one can be made) and start it in it."""
        return self._start_process(record, partial(self._new_run, loose_end))

    def save_waiting(self, record: TaskRecord, loose_end: LooseEnd) -> None:
        """Create the files of a task that waits for a place to run, an earlier run's moved
        aside, and save its record and loose end."""
        self._check_space()
        try:
            with self._new_run(loose_end, record):
                pass
        except OSError as exc:
            raise DiskError(_cannot_create(exc, self.store.tasks_dir)) from None

    def start_waiting(self, record: TaskRecord) -> Started:
        """Start a task that waited for a place to run, in the files saved as it joined the
        line; its record is saved first, out of the line, and made durable."""
        return self._start_process(record, self._saved_run)

    @contextlib.contextmanager
    def _new_run(self, loose_end: LooseEnd, record: TaskRecord) -> Iterator[RunFiles]:
        with self.store.new_run(record.id, record.cmd.encode()) as files:
            try:
                # On disk before the process starts, so that no crash of the daemon can lose a
                # task that ran; not fsynced (see `_recovery` for what a power loss keeps).
                self.ledger.save_start(record, loose_end)
                self.watcher.save_start(record)
                yield files
            except BaseException:
                self.ledger.unsave_start(record)
                self.watcher.unsave_start(record)
                raise

    @contextlib.contextmanager
    def _saved_run(self, record: TaskRecord) -> Iterator[RunFiles]:
        with self.store.open_run(record.id) as files:
            # Out of the line on disk, durably, before its process starts: a daemon that dies
            # now (or a power cut) finds it by its wrapper's mark, or knows it may have run,
            # and never runs it twice.
            self.store.save_record(record)
            self.store.sync_tasks_dir()
            yield files

    def _check_space(self) -> None:
        if not self.store.has_space():
            full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            raise DiskError(_cannot_create(full, self.store.tasks_dir))

    def _start_process(
        self,
        record: TaskRecord,
        files_of: Callable[[TaskRecord], contextlib.AbstractContextManager[RunFiles]],
    ) -> Started:
        """Make the task's cgroup (where one can be made) and start it there, in the files that
        ``files_of`` gives for its record, now saying what holds it."""
        store = self.store
        _limits.check_room_for_a_task()
        self._check_space()
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
