"""The state directory: task records, commands, output files, exit files and loose ends.

    <state>/bash-tasks/<id>.json      the task record (temp + rename; made durable as _recovery says)
    <state>/bash-tasks/<id>.cmd       the command, written before the task starts; bash reads it
    <state>/bash-tasks/<id>.out|.err  the task's stdout and stderr, written by the task itself
    <state>/bash-tasks/<id>.exit      the exit status, written by the task's wrapper shell
    <state>/bash-tasks/<id>.<ext>.<n> an earlier run of a reused name: `build.out.1` is the
                                      first run's stdout, `build.out.2` the second's, ...
    <state>/mcp-loose-ends/bash-task-<id>.json   an end the agent is owed, of the id's latest run
    <state>/mcp-loose-ends/bash-task-<id>@<serial>.json   ... of an earlier run, still owed when
                                      a new run took its name (each run's end is owed on its own)

Tasks run as the daemon's user and can write here, so nothing the daemon writes follows a
symlink: a task's files are created with O_CREAT|O_EXCL|O_NOFOLLOW, a record or loose end
is written to a temporary file created the same way and renamed over its path (a rename
replaces a symlink, never its target), and reads use O_NOFOLLOW and take regular files
only (a FIFO planted here would otherwise block the reader).

Before a task starts, whatever is at its five paths (an earlier run of the same name, or
anything planted there) is renamed aside to the next free generation number: nothing is
deleted. The number goes after the extension so that no generation of one id can be
mistaken for a file of another (ids may contain dots and digits: `build.1` is a valid
name, and `build.1.out` its stdout), and so that `*.json` is still exactly the current
records. The highest generation is the most recent earlier run.

Retention (`hive.bash.files._retention`) lists the runs here and removes them, the record last; a
lock per task id, held while a run's files are moved aside and created and while the new
record is saved, keeps it from removing a run that started meanwhile under the same name.

Everything here is synchronous and small; callers run the fsyncing writes in a
worker thread so the event loop never waits on the disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import attrs

from hive import _files
from hive._files import (
    fsync_dir,
    read_regular,
    truncate_regular,
    write_atomic,
)
from hive._limits import is_name
from hive.bash.files._converter import RecordError, decode, encode
from hive.bash.files._records import LooseEnd, TaskRecord
from hive.bash.files._task_files import TASK_FILE_SUFFIXES, TaskFiles

log = logging.getLogger(__name__)

TAIL_BYTES = 4096
_RUN_FILE = re.compile(r"(.+)\.(json|cmd|out|err|exit)(?:\.([0-9]+))?")


@attrs.frozen
class ExitStatus:
    """What a task's wrapper wrote to its ``.exit`` file: its command's status, and when."""

    code: int
    written_at: float
    """The file's modification time, the wrapper's write: the task's last act (Unix time)."""


@attrs.frozen
class Tail:
    """The last bytes of an output file as text, with the file's size and path."""

    text: str
    size: int
    path: Path

    @property
    def truncated(self) -> bool:
        """Whether the file holds more than the tail shows."""
        return self.size > TAIL_BYTES


def decode_tail(data: bytes) -> str:
    """UTF-8 with replacement, starting on a character boundary (a cut multi-byte character is dropped)."""
    start = 0
    while start < min(len(data), 3) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8", errors="replace")


def read_tail(path: Path, limit: int = TAIL_BYTES) -> Tail:
    """The end of an output file; empty if it is missing or is not a regular file (a planted symlink)."""
    try:
        data, size = _files.read_tail(path, limit)
    except OSError:
        return Tail("", 0, path)
    return Tail(decode_tail(data) if size > limit else data.decode("utf-8", errors="replace"), size, path)


def last_lines(text: str, count: int) -> str:
    lines = text.splitlines()
    return "\n".join(lines[-count:])


@attrs.frozen
class UnreadableLooseEnd:
    """A loose end that could not be read, as its name tells it: whose end it owes, of which
    run (the serial, in the name of an earlier run's), and where it is."""

    task_id: str
    serial: str | None
    path: Path

    @classmethod
    def named(cls, path: Path) -> UnreadableLooseEnd | None:
        """What the name of the loose end at ``path`` says; None for a name hive never gives."""
        task_id, at, serial = path.name.removeprefix("bash-task-").removesuffix(".json").partition("@")
        if not is_name(task_id) or (at and not serial):
            return None
        return cls(task_id, serial or None, path)


def serial_from_files(paths: list[Path], task_id: str) -> str:
    """The serial of a run known only by its files (``paths``: its ``.cmd``, ``.out``, ...),
    the same for the same files: a recovery that dies after sending its end and before saving
    its record gives the next recovery the same end id, which the agent drops as a repeat."""
    for path in paths:
        try:
            found = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        # An inode keeps its number while the file lives; a later run of the name is a new file.
        identity = f"{task_id}\0{found.st_dev}\0{found.st_ino}".encode()
        return hashlib.sha256(identity).hexdigest()[:16]
    return secrets.token_hex(8)


@attrs.frozen
class StoredRun:
    """One run's files as a listing of ``bash-tasks/`` found them: the current run of a task
    (generation 0: ``<id>.json``, ``.cmd``, ...) or an earlier one (``<id>.json.<n>``, ...)."""

    task_id: str
    generation: int
    size: int
    """Bytes in all its files together (a symlink counts as itself, not its target)."""
    mtime: float
    """When the newest of its files last changed."""


@attrs.define
class TaskStore(TaskFiles):
    """The daemon's state directory: every run's files in ``bash-tasks/``, the loose ends in ``mcp-loose-ends/``."""

    # -- records ---------------------------------------------------------------------------------

    def save_record(self, record: TaskRecord, *, durable: bool = True) -> None:
        """Write ``record`` (temporary file and rename; fsynced when ``durable``)."""
        write_atomic(self.record_path(record.id), encode(record), durable=durable)

    def delete_record(self, task_id: str) -> None:
        """Remove the record of ``task_id``'s current run (blocking)."""
        with contextlib.suppress(FileNotFoundError):
            self.record_path(task_id).unlink()

    def load_records(self, unreadable: list[str] | None = None) -> Iterator[TaskRecord]:
        """Every current run's record that can be read. One that cannot (a crash or a power cut
        left it empty or torn) is logged and skipped, and its task's id added to ``unreadable``."""
        for path in sorted(self.tasks_dir.glob("*.json")):
            try:
                data = read_regular(path)
                if data is not None:
                    yield decode(data, TaskRecord)
            except (OSError, RecordError) as exc:
                task_id = path.name.removesuffix(".json")
                if unreadable is not None and is_name(task_id):
                    unreadable.append(task_id)
                    log.warning(
                        "unreadable task record %s (%s): task %s is owed as its files tell",
                        path,
                        exc,
                        task_id,
                    )
                else:
                    log.warning("skipping unreadable task record %s: %s", path, exc)

    def current_task_ids(self) -> list[str]:
        """The ids that have files of a current run here (``<id>.cmd``, ``.out``, ``.err``, ``.exit``)."""
        ids = set()
        with os.scandir(self.tasks_dir) as entries:
            for entry in entries:
                name = entry.name
                for suffix in TASK_FILE_SUFFIXES[1:]:
                    if name.endswith(suffix) and not name.startswith("."):
                        ids.add(name.removesuffix(suffix))
        return sorted(ids)

    def read_cmd(self, task_id: str) -> str | None:
        """The command in ``<id>.cmd``; None if it is missing or unreadable."""
        try:
            data = read_regular(self.cmd_path(task_id))
        except OSError as exc:
            log.warning("unreadable command of task %s: %s", task_id, exc)
            return None
        return None if data is None else data.decode(errors="surrogateescape")

    def read_exit_status(self, task_id: str) -> ExitStatus | None:
        """The status the wrapper wrote, and when, or None if it never wrote one (the file is
        created blank: `EXIT_PLACEHOLDER`, or empty by an earlier daemon). The blanks after a
        status are cut off, so the file then holds the status alone, and keeps the time of the
        wrapper's write: a later read (a recovery after a crash) finds the same end."""
        path = self.exit_path(task_id)
        try:
            written_at = os.stat(path, follow_symlinks=False).st_mtime
            text = read_regular(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("unreadable exit status of task %s: %s", task_id, exc)
            return None
        if text is None:
            return None
        try:
            status = int(text)
        except ValueError:
            return None
        if len(text) > len(f"{status}\n"):
            # The blanks that held the room for it are not part of it.
            try:
                truncate_regular(path, len(f"{status}\n"), keep_times=True)
            except OSError as exc:
                log.warning("cannot trim the exit file of task %s: %s", task_id, exc)
        return ExitStatus(status, written_at)

    # -- retention -------------------------------------------------------------------------------

    def stored_runs(self) -> list[StoredRun]:
        """Every run with files in ``bash-tasks/``, current and earlier (one scan; blocking)."""
        found: dict[tuple[str, int], tuple[int, float]] = {}
        with os.scandir(self.tasks_dir) as entries:
            for entry in entries:
                match = _RUN_FILE.fullmatch(entry.name)
                if match is None or not is_name(match[1]):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (match[1], int(match[3] or 0))
                size, mtime = found.get(key, (0, 0.0))
                found[key] = (size + info.st_size, max(mtime, info.st_mtime))
        return [
            StoredRun(task_id, generation, size, mtime)
            for (task_id, generation), (size, mtime) in sorted(found.items())
        ]

    def loose_end_ids(self) -> set[str]:
        """The ids that have a loose end on disk (by its file's name; blocking)."""
        ids = set()
        with os.scandir(self.loose_ends_dir) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("bash-task-") and name.endswith(".json"):
                    ids.add(name.removeprefix("bash-task-").removesuffix(".json").partition("@")[0])
        return ids

    def _run_paths(self, task_id: str, generation: int) -> tuple[list[Path], Path]:
        """A run's files but its record, and its record."""
        tail = f".{generation}" if generation else ""
        paths = [self.tasks_dir / f"{task_id}{suffix}{tail}" for suffix in TASK_FILE_SUFFIXES]
        return paths[1:], paths[0]

    def _still_that_run(self, task_id: str, generation: int, serial: str | None) -> bool:
        """Whether the current run of ``task_id`` on disk is still the one with ``serial`` (and
        owes nothing); an earlier run's files never change hands."""
        if generation:
            return True
        loose_end = self.load_loose_end(task_id)
        if loose_end is not None:
            return False
        try:
            data = read_regular(self.record_path(task_id))
            on_disk = None if data is None else decode(data, TaskRecord).serial
        except (OSError, RecordError):
            on_disk = None
        return on_disk is None or on_disk == serial

    def remove_run_files(self, task_id: str, generation: int, serial: str | None) -> int | None:
        """Remove a run's files but its record (see `remove_run_record`); the bytes freed, or
        None if it is no longer that run (a new run took the name, or its end is owed again).

        Its record goes last, after the directory is synced, so that a crash or a power loss
        in between leaves a record without files (shown as it was, pruned again at the next
        pass), never files without a record (which recovery would take for a lost task)."""
        with self._id_locks.holding(task_id):
            if not self._still_that_run(task_id, generation, serial):
                return None
            freed = 0
            files, _record = self._run_paths(task_id, generation)
            for path in files:
                try:
                    size = os.lstat(path).st_size
                    path.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("cannot remove %s: %s", path, exc)
                    return None
                freed += size
            return freed

    def remove_run_record(self, task_id: str, generation: int, serial: str | None) -> int:
        """Remove the record of a run whose other files `remove_run_files` removed; its size."""
        with self._id_locks.holding(task_id):
            if not self._still_that_run(task_id, generation, serial):
                return 0
            _files, record = self._run_paths(task_id, generation)
            try:
                size = os.lstat(record).st_size
                record.unlink()
            except FileNotFoundError:
                return 0
            except OSError as exc:
                log.warning("cannot remove %s: %s", record, exc)
                return 0
            return size

    # -- loose ends ------------------------------------------------------------------------------

    def save_loose_end(self, loose_end: LooseEnd, *, earlier: bool = False, durable: bool = True) -> None:
        """Save the loose end of the id's latest run, or with ``earlier`` of a run whose name a
        later one took."""
        serial = loose_end.serial if earlier else None
        write_atomic(self.loose_end_path(loose_end.task_id, serial), encode(loose_end), durable=durable)

    def load_loose_end(self, task_id: str) -> LooseEnd | None:
        """The loose end of ``task_id``'s latest run, if there is one that can be read."""
        try:
            data = read_regular(self.loose_end_path(task_id))
            return None if data is None else decode(data, LooseEnd)
        except (OSError, RecordError) as exc:
            log.warning("unreadable loose end for %s: %s", task_id, exc)
            return None

    def load_loose_ends(
        self, unreadable: list[UnreadableLooseEnd] | None = None
    ) -> Iterator[tuple[LooseEnd, bool]]:
        """Every loose end, and whether it is an earlier run's (kept at its own path). One that
        cannot be read (a crash or a power cut left it empty or torn) is logged and skipped,
        and what its name says added to ``unreadable``."""
        for path in sorted(self.loose_ends_dir.glob("bash-task-*.json")):
            try:
                data = read_regular(path)
                if data is not None:
                    yield decode(data, LooseEnd), "@" in path.name
            except (OSError, RecordError) as exc:
                named = UnreadableLooseEnd.named(path)
                if unreadable is not None and named is not None:
                    unreadable.append(named)
                    log.warning(
                        "unreadable loose end %s (%s): the end of task %s is owed", path, exc, named.task_id
                    )
                else:
                    log.warning("skipping unreadable loose end %s: %s", path, exc)

    def set_aside_loose_end(self, loose_end: LooseEnd) -> None:
        """Keep ``loose_end``, an earlier run's, at that run's own path (durably), and remove it
        from the latest run's path if it is still there."""
        with self._id_locks.holding(loose_end.task_id):
            self.save_loose_end(loose_end, earlier=True)
            current = self.load_loose_end(loose_end.task_id)
            if current is not None and current.serial == loose_end.serial:
                self.loose_end_path(loose_end.task_id).unlink(missing_ok=True)
        fsync_dir(self.loose_ends_dir)

    def delete_loose_end(self, task_id: str, serial: str, *, durable: bool = True) -> None:
        """Remove the loose end of this run of ``task_id`` (not of a later task that reused the name).

        ``durable`` fsyncs the directory after (without it, the caller does so later)."""
        # Under the id's lock: a new run of the name cannot save its loose end between the
        # read and the removal.
        with self._id_locks.holding(task_id):
            self.loose_end_path(task_id, serial).unlink(missing_ok=True)
            current = self.load_loose_end(task_id)
            if current is not None and current.serial == serial:
                self.loose_end_path(task_id).unlink(missing_ok=True)
        if durable:
            fsync_dir(self.loose_ends_dir)
