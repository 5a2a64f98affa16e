"""The line of tasks waiting for a place to run (``hive-bash-daemon --max-running``).

Bookkeeping alone, no Trio and no I/O: which runs hold a place (being started, or running
until their wrapper exits), which wait and in what order, and which may start now. A waiting
task holds a number, saved in its record (``queued``), so that a restarted daemon puts the line
back in the same order. A task joins the line before its files are saved, to keep its place
among callers that come at once; it may start only once they are (`saved`), and a stop asked
for meanwhile takes effect then.
"""

from __future__ import annotations

import attrs

from hive.bash._task import Task
from hive.bash.ends._owed import Key


@attrs.define
class _Waiting:
    task: Task
    saved: bool
    """Its files, record and loose end are on disk: it may start."""
    stop_asked: bool = False


@attrs.define
class RunLine:
    """Places to run, at most ``limit`` of them (None: no limit), and the line for them."""

    limit: int | None = None
    _running: set[Key] = attrs.field(factory=set)
    _waiting: list[_Waiting] = attrs.field(factory=list)
    """In the order of their numbers."""
    _next: int = 1

    @property
    def running(self) -> int:
        """How many runs hold a place."""
        return len(self._running)

    def must_wait(self) -> bool:
        """Whether a task started now waits: every place is taken, or others wait before it."""
        return self.limit is not None and (len(self._running) >= self.limit or bool(self._waiting))

    def take_number(self) -> int:
        """The number of the next task to join the line."""
        number = self._next
        self._next += 1
        return number

    def occupy(self, key: Key) -> None:
        """A run holds a place from now (it starts without waiting, or was found running)."""
        self._running.add(key)

    def vacate(self, key: Key) -> None:
        """A run no longer holds a place: its wrapper has exited, or it could not be started."""
        self._running.discard(key)

    def join(self, task: Task, *, saved: bool) -> None:
        """Put ``task`` (whose record holds its number) in line, behind every lower number."""
        number = _number(task)
        self._next = max(self._next, number + 1)
        index = next((i for i, w in enumerate(self._waiting) if _number(w.task) > number), len(self._waiting))
        self._waiting.insert(index, _Waiting(task, saved))

    def saved(self, key: Key) -> bool:
        """The task's files are on disk, and it may start; True if a stop was asked for meanwhile
        (it has then left the line, and is the caller's to end)."""
        entry = self._entry(key)
        if entry is None:
            return False
        if entry.stop_asked:
            self._waiting.remove(entry)
            return True
        entry.saved = True
        return False

    def leave(self, key: Key) -> bool:
        """Take a waiting task out of the line (a stop): True if it has left now; False if it is
        not in line, or its files are still being saved (then it leaves once they are: `saved`)."""
        entry = self._entry(key)
        if entry is None:
            return False
        if not entry.saved:
            entry.stop_asked = True
            return False
        self._waiting.remove(entry)
        return True

    def drop(self, key: Key) -> None:
        """Forget a task whose start failed before it was in line for good."""
        entry = self._entry(key)
        if entry is not None:
            self._waiting.remove(entry)

    def waits(self, key: Key) -> bool:
        """Whether the task is in line."""
        return self._entry(key) is not None

    def place(self, key: Key) -> int | None:
        """Its place in line, 1 for the next to start; None if it is not in line."""
        for place, entry in enumerate(self._waiting, start=1):
            if entry.task.key == key:
                return place
        return None

    def due(self) -> list[Task]:
        """The tasks that start now, in order: each takes a place as it leaves the line. A task
        whose files are still being saved holds up the ones behind it."""
        started = []
        while self._waiting and self._waiting[0].saved and not self._full():
            task = self._waiting.pop(0).task
            self._running.add(task.key)
            started.append(task)
        return started

    def _full(self) -> bool:
        return self.limit is not None and len(self._running) >= self.limit

    def _entry(self, key: Key) -> _Waiting | None:
        return next((w for w in self._waiting if w.task.key == key), None)


def _number(task: Task) -> int:
    number = task.record.queued
    assert number is not None, f"task {task.id} joins the line without a number"
    return number
