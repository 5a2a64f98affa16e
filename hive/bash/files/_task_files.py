"""A task's files in the state directory: where each is, and how a new run's are made.

Tasks run as the daemon's user and can write here, so a task's files are created with
O_CREAT|O_EXCL|O_NOFOLLOW. Before a task starts, whatever is at its five paths (an earlier run
of the same name, or anything planted there) is renamed aside to the next free generation
number (see `hive.bash.files._store`): nothing is deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs

from hive._files import create_new, ensure_private_dir, fsync_dir, path_field

log = logging.getLogger(__name__)

EXIT_PLACEHOLDER = b" " * 16
"""What a new `.exit` file holds until the wrapper writes the status over it: the room that
write needs, taken while the disk still has it. Blank: it reads as no status."""
TASK_FILE_SUFFIXES = (".json", ".cmd", ".out", ".err", ".exit")
_GENERATION = re.compile(r"\.(?:json|cmd|out|err|exit)\.([0-9]+)")


@attrs.frozen
class RunFiles:
    """The descriptors of a new run's files: the command (read from its start), output and exit status."""

    cmd: int
    out: int
    err: int
    exit: int


@attrs.define
class IdLocks:
    """A lock per task id, held while a run's files are moved, created or removed, so that
    retention never removes the files of a run that started meanwhile under the same name, and
    a loose end removed by serial never takes the new run's with it. Reentrant: a new run whose
    start fails removes what it saved while it holds its id's lock."""

    _guard: threading.Lock = attrs.field(factory=threading.Lock)
    _held: dict[str, tuple[threading.RLock, list[int]]] = attrs.field(factory=dict)

    @contextlib.contextmanager
    def holding(self, task_id: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._held.setdefault(task_id, (threading.RLock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._held[task_id]


@attrs.define
class TaskFiles:
    """Where the files of each run are, in ``bash-tasks/`` and ``mcp-loose-ends/``, and the
    making of a new run's (see :class:`~hive.bash.files._store.TaskStore` for the rest)."""

    root: Path
    tasks_dir: Path = path_field("root", "bash-tasks")
    """Every run's files: ``<id>.json``, ``.cmd``, ``.out``, ``.err``, ``.exit``."""
    loose_ends_dir: Path = path_field("root", "mcp-loose-ends")
    """The loose ends: one file per end the agent is owed (the harness's hyperhive tools read them)."""
    _id_locks: IdLocks = attrs.field(factory=IdLocks, init=False, repr=False)

    def create_dirs(self) -> None:
        """Create the state directory, ``bash-tasks/`` and ``mcp-loose-ends/`` (0700), where missing."""
        for d in (self.root, self.tasks_dir, self.loose_ends_dir):
            ensure_private_dir(d)

    def record_path(self, task_id: str) -> Path:
        """Where the record of ``task_id``'s current run is (``<id>.json``)."""
        return self.tasks_dir / f"{task_id}.json"

    def out_path(self, task_id: str) -> Path:
        """Where ``task_id``'s current run writes its stdout (``<id>.out``)."""
        return self.tasks_dir / f"{task_id}.out"

    def err_path(self, task_id: str) -> Path:
        """Where ``task_id``'s current run writes its stderr (``<id>.err``)."""
        return self.tasks_dir / f"{task_id}.err"

    def exit_path(self, task_id: str) -> Path:
        """Where ``task_id``'s current run's wrapper writes its exit status (``<id>.exit``)."""
        return self.tasks_dir / f"{task_id}.exit"

    def cmd_path(self, task_id: str) -> Path:
        """Where ``task_id``'s current run's command is (``<id>.cmd``)."""
        return self.tasks_dir / f"{task_id}.cmd"

    def task_paths(self, task_id: str) -> list[Path]:
        """Every file of ``task_id``'s current run, its record first."""
        return [self.tasks_dir / f"{task_id}{suffix}" for suffix in TASK_FILE_SUFFIXES]

    def loose_end_path(self, task_id: str, serial: str | None = None) -> Path:
        """Where the loose end of ``task_id``'s latest run is; with ``serial``, where that of an
        earlier run is kept once a new run took the name (ids have no ``@``)."""
        if serial is None:
            return self.loose_ends_dir / f"bash-task-{task_id}.json"
        return self.loose_ends_dir / f"bash-task-{task_id}@{serial}.json"

    def output_size(self, task_id: str) -> int:
        """The bytes in ``task_id``'s stdout and stderr together (0 for a file that is not there)."""
        total = 0
        for path in (self.out_path(task_id), self.err_path(task_id)):
            with contextlib.suppress(OSError):
                total += os.stat(path).st_size
        return total

    def has_space(self) -> bool:
        """Whether the disk holding the task files has any room left."""
        try:
            return os.statvfs(self.tasks_dir).f_bavail > 0
        except OSError:
            return True

    def sync_tasks_dir(self) -> None:
        """fsync ``bash-tasks/`` itself: the renames and removals in it made durable."""
        fsync_dir(self.tasks_dir)

    # -- a run's files ---------------------------------------------------------------------------

    def top_generation(self, task_id: str) -> int:
        """The highest generation number of ``task_id``'s earlier runs; 0 if there is none."""
        top = 0
        prefix = f"{task_id}."
        with os.scandir(self.tasks_dir) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    match = _GENERATION.fullmatch(entry.name, len(task_id))
                    if match is not None:
                        top = max(top, int(match[1]))
        return top

    def rotate(self, task_id: str) -> list[tuple[Path, Path]]:
        """Rename whatever is at ``task_id``'s paths aside, to the next generation; the renames done.

        A rename moves a symlink itself, never its target; nothing is deleted.
        """
        present = [path for path in self.task_paths(task_id) if os.path.lexists(path)]
        if not present:
            return []
        generation = self.top_generation(task_id) + 1
        moved: list[tuple[Path, Path]] = []
        try:
            for path in present:
                aside = path.with_name(f"{path.name}.{generation}")
                os.rename(path, aside)
                moved.append((path, aside))
        except OSError:
            self._restore(moved)
            raise
        return moved

    def _restore(self, moved: list[tuple[Path, Path]]) -> None:
        for path, aside in reversed(moved):
            try:
                os.rename(aside, path)
            except OSError as exc:
                log.warning("cannot move %s back to %s: %s", aside, path, exc)

    @contextlib.contextmanager
    def new_run(self, task_id: str, cmd: bytes) -> Iterator[RunFiles]:
        """The files of a new run of ``task_id``, created afresh, an earlier run's moved aside first.

        Yields their descriptors (closed when the block ends; the task keeps its own copies).
        If the block raises, the new files are removed and the earlier run's moved back.
        """
        # The id's lock is held until the record is saved (by the block), so retention sees
        # the earlier run or the new one with its record, never the new one's files alone.
        with self._id_locks.holding(task_id), self._new_run(task_id, cmd) as files:
            yield files

    @contextlib.contextmanager
    def _new_run(self, task_id: str, cmd: bytes) -> Iterator[RunFiles]:
        moved = self.rotate(task_id)
        created: list[Path] = []
        fds: list[int] = []

        def create(path: Path, flags: int = os.O_WRONLY) -> int:
            fd = create_new(path, flags)
            fds.append(fd)
            created.append(path)
            return fd

        try:
            cmd_fd = create(self.cmd_path(task_id), os.O_RDWR)
            view = memoryview(cmd)
            while view:
                view = view[os.write(cmd_fd, view) :]
            os.lseek(cmd_fd, 0, os.SEEK_SET)
            yield RunFiles(
                cmd=cmd_fd,
                out=create(self.out_path(task_id)),
                err=create(self.err_path(task_id)),
                exit=self._reserved_exit(create(self.exit_path(task_id))),
            )
        except BaseException:
            for path in created:
                with contextlib.suppress(OSError):
                    path.unlink()
            self._restore(moved)
            raise
        finally:
            for fd in fds:
                os.close(fd)

    @contextlib.contextmanager
    def open_run(self, task_id: str) -> Iterator[RunFiles]:
        """The files `new_run` made for a run that did not start then (it waited for a place to
        run), opened to start it now; closed when the block ends. A file that is gone, or a
        symlink now, is an :class:`OSError`."""
        fds: list[int] = []

        def open_existing(path: Path, flags: int) -> int:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
            fds.append(fd)
            return fd

        with self._id_locks.holding(task_id):
            try:
                yield RunFiles(
                    cmd=open_existing(self.cmd_path(task_id), os.O_RDONLY),
                    out=open_existing(self.out_path(task_id), os.O_WRONLY),
                    err=open_existing(self.err_path(task_id), os.O_WRONLY),
                    exit=open_existing(self.exit_path(task_id), os.O_WRONLY),
                )
            finally:
                for fd in fds:
                    os.close(fd)

    @staticmethod
    def _reserved_exit(fd: int) -> int:
        """The new `.exit` file with the room its status needs taken now (see `EXIT_PLACEHOLDER`):
        a disk that fills up while the task runs cannot then refuse the wrapper's write."""
        view = memoryview(EXIT_PLACEHOLDER)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
