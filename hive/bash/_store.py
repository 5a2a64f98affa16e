"""The state directory: task records, output files, exit files and loose ends.

    <state>/bash-tasks/<id>.json      the task record (temp + fsync + rename)
    <state>/bash-tasks/<id>.out|.err  the task's stdout and stderr, written by the task itself
    <state>/bash-tasks/<id>.exit      the exit status, written by the task's wrapper shell
    <state>/mcp-loose-ends/bash-task-<id>.json   an end the agent is owed

Everything here is synchronous and small; callers run the fsyncing writes in a
worker thread so the event loop never waits on the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from hive.bash._records import LooseEnd, TaskRecord
from hive.bash._wire import RecordError, decode, encode

log = logging.getLogger(__name__)

TAIL_BYTES = 4096


@attrs.frozen
class Tail:
    text: str
    size: int
    path: Path

    @property
    def truncated(self) -> bool:
        return self.size > TAIL_BYTES


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def decode_tail(data: bytes) -> str:
    """UTF-8 with replacement, starting on a character boundary (a cut multi-byte character is dropped)."""
    start = 0
    while start < min(len(data), 3) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8", errors="replace")


def read_tail(path: Path, limit: int = TAIL_BYTES) -> Tail:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return Tail("", 0, path)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, limit, max(0, size - limit))
    finally:
        os.close(fd)
    return Tail(decode_tail(data) if size > limit else data.decode("utf-8", errors="replace"), size, path)


def last_lines(text: str, count: int) -> str:
    lines = text.splitlines()
    return "\n".join(lines[-count:])


@attrs.define
class TaskStore:
    root: Path

    @property
    def tasks_dir(self) -> Path:
        return self.root / "bash-tasks"

    @property
    def loose_ends_dir(self) -> Path:
        return self.root / "mcp-loose-ends"

    def create_dirs(self) -> None:
        for d in (self.root, self.tasks_dir, self.loose_ends_dir):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)

    def record_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.json"

    def out_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.out"

    def err_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.err"

    def exit_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.exit"

    def loose_end_path(self, task_id: str) -> Path:
        return self.loose_ends_dir / f"bash-task-{task_id}.json"

    def has_space(self) -> bool:
        """Whether the disk holding the task files has any room left."""
        try:
            return os.statvfs(self.tasks_dir).f_bavail > 0
        except OSError:
            return True

    # -- records ---------------------------------------------------------------------------------

    def save_record(self, record: TaskRecord) -> None:
        write_atomic(self.record_path(record.id), encode(record))

    def delete_record(self, task_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.record_path(task_id).unlink()

    def load_records(self) -> Iterator[TaskRecord]:
        for path in sorted(self.tasks_dir.glob("*.json")):
            try:
                yield decode(path.read_bytes(), TaskRecord)
            except (OSError, RecordError) as exc:
                log.warning("skipping unreadable task record %s: %s", path, exc)

    def read_exit_status(self, task_id: str) -> int | None:
        """The status the wrapper wrote, or None if it never finished writing one."""
        try:
            fd = os.open(self.exit_path(task_id), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            text = os.read(fd, 64)
        finally:
            os.close(fd)
        try:
            return int(text)
        except ValueError:
            return None

    def clear_exit_status(self, task_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.exit_path(task_id).unlink()

    # -- loose ends ------------------------------------------------------------------------------

    def save_loose_end(self, loose_end: LooseEnd) -> None:
        write_atomic(self.loose_end_path(loose_end.task_id), encode(loose_end))

    def load_loose_end(self, task_id: str) -> LooseEnd | None:
        try:
            return decode(self.loose_end_path(task_id).read_bytes(), LooseEnd)
        except FileNotFoundError:
            return None
        except (OSError, RecordError) as exc:
            log.warning("unreadable loose end for %s: %s", task_id, exc)
            return None

    def load_loose_ends(self) -> Iterator[LooseEnd]:
        for path in sorted(self.loose_ends_dir.glob("bash-task-*.json")):
            try:
                yield decode(path.read_bytes(), LooseEnd)
            except (OSError, RecordError) as exc:
                log.warning("skipping unreadable loose end %s: %s", path, exc)

    def delete_loose_end(self, task_id: str, serial: str) -> None:
        """Remove the loose end of this run of ``task_id`` (not of a later task that reused the name)."""
        current = self.load_loose_end(task_id)
        if current is None or current.serial != serial:
            return
        self.loose_end_path(task_id).unlink(missing_ok=True)
        fsync_dir(self.loose_ends_dir)
