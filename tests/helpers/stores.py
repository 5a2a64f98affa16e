"""Task stores that fail on purpose: a disk that fills up, a daemon that dies at its Nth write."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from hive.bash import ExitStatus, LooseEnd, RunFiles, TaskRecord, TaskStore


class Crash(BaseException):
    """The daemon died at this write: nothing of it, nor of any write after it, reaches the disk."""


@attrs.define
class CrashingStore(TaskStore):
    """A store whose process dies at its ``crash_at``-th write (1-based; None: never): that write
    and every later one raise `Crash` without touching the disk, and nothing the store would
    undo on the way out (a new run's files) is undone, as nothing is after a SIGKILL.

    From its ``full_at``-th write on (None: never), until `make_room`, the disk is full: the
    writes that take room fail with ENOSPC, as a real one's would. ``on_crash`` is called once, from the thread of the
    write that died (to end the phase the test is in)."""

    crash_at: int | None = None
    full_at: int | None = None
    on_crash: Callable[[], None] | None = None
    writes: int = 0
    crashed: bool = False
    full: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _starting: int = 0
    """New runs being made (their files created, their process started) in some thread."""
    _started: threading.Condition = attrs.field(factory=threading.Condition)
    spawned: list[tuple[str, bytes]] = attrs.field(factory=list)
    """The runs (task id, command) whose new-run block ended as it should: their process started."""

    def _write(self, *, takes_space: bool = True) -> None:
        """Count a write, then die at it, or fail at it for want of space (only a write that
        ``takes_space``: a full disk still renames and removes), if its number says so."""
        with self._lock:
            if not self.crashed:
                self.writes += 1
                if self.writes == self.crash_at:
                    self.crash()
                elif self.writes == self.full_at:
                    self.full = True
            if self.crashed:
                raise Crash(f"write {self.writes}")
            if self.full and takes_space:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def crash(self) -> None:
        """Die now (if not dead already): no write from here on reaches the disk."""
        if not self.crashed:
            self.crashed = True
            if self.on_crash is not None:
                self.on_crash()

    def make_room(self) -> None:
        """The disk has room again."""
        self.full = False

    def has_space(self) -> bool:
        return not self.full and super().has_space()

    def save_record(self, record: TaskRecord, *, durable: bool = True) -> None:
        self._write()
        super().save_record(record, durable=durable)

    def delete_record(self, task_id: str) -> None:
        self._write(takes_space=False)
        super().delete_record(task_id)

    def rotate(self, task_id: str) -> list[tuple[Path, Path]]:
        self._write(takes_space=False)
        return super().rotate(task_id)

    @contextlib.contextmanager
    def new_run(self, task_id: str, cmd: bytes) -> Iterator[RunFiles]:
        self._write()
        crash = None
        with self._started:
            self._starting += 1
        try:
            with super().new_run(task_id, cmd) as files:
                try:
                    yield files
                except Crash as exc:
                    crash = exc  # a dead daemon removes none of the new run's files
                else:
                    self.spawned.append((task_id, cmd))
        finally:
            with self._started:
                self._starting -= 1
                self._started.notify_all()
        if crash is not None:
            raise crash

    def wait_until_started(self, timeout: float = 30.0) -> None:
        """Block until no new run is halfway made: a process whose fork was under way as the
        daemon died has then exec'd its wrapper, as it would have outside this process (its
        threads go on after the death here, where a SIGKILL stops them all at once)."""
        with self._started:
            if not self._started.wait_for(lambda: self._starting == 0, timeout):
                raise TimeoutError(f"a new run was still being made {timeout} s after the daemon died")

    def save_loose_end(self, loose_end: LooseEnd, *, earlier: bool = False, durable: bool = True) -> None:
        self._write()
        super().save_loose_end(loose_end, earlier=earlier, durable=durable)

    def set_aside_loose_end(self, loose_end: LooseEnd) -> None:
        self._write()
        super().set_aside_loose_end(loose_end)

    def delete_loose_end(self, task_id: str, serial: str, *, durable: bool = True) -> None:
        self._write(takes_space=False)
        super().delete_loose_end(task_id, serial, durable=durable)

    def remove_run_files(self, task_id: str, generation: int, serial: str | None) -> int | None:
        self._write(takes_space=False)
        return super().remove_run_files(task_id, generation, serial)

    def remove_run_record(self, task_id: str, generation: int, serial: str | None) -> int:
        self._write(takes_space=False)
        return super().remove_run_record(task_id, generation, serial)

    def read_exit_status(self, task_id: str) -> ExitStatus | None:
        # It trims the blanks after the status: a write too, after which a dead daemon reads nothing.
        if self.crashed:
            raise Crash("read after death")
        return super().read_exit_status(task_id)
