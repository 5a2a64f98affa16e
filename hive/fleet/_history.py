"""An agent's last turns, read from the end of its turn log: the tokens and cost of each (the
fleet page's small chart), and the log's last lines to render (an agent's page)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import attrs

from hive._files import open_regular

TURNS = 50
"""How many turns the chart shows."""
TAIL_BYTES = 1 << 20
"""How much of the end of a turn log is read: memory stays bounded however long the log is."""


@attrs.frozen
class TurnPoint:
    """One ended turn: its number, when it ended, its tokens (in and out) and its cost."""

    turn: int
    ended: float
    tokens: int
    cost: float


def read_tail(path: Path, limit: int = TAIL_BYTES) -> tuple[list[bytes], int]:
    """The whole lines of the last ``limit`` bytes of ``path`` (the first, cut, left out), and
    the offset the file ended at; no lines for a file that is not there."""
    fd = open_regular(path)
    if fd is None:
        return [], 0
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1
    lines = data[:end].split(b"\n")[:-1]
    if start > 0 and lines:
        lines = lines[1:]
    return lines, start + end


def objects(lines: list[bytes]) -> list[dict[str, Any]]:
    """The lines that are JSON objects (a torn or foreign line is skipped)."""
    found = []
    for line in lines:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def turn_points(path: Path, turns: int = TURNS) -> list[TurnPoint]:
    """The last ``turns`` turns ended in the turn log at ``path``, oldest first (its last
    `TAIL_BYTES` read). A turn's cost is its record's ``cost_usd``; its tokens are its record's,
    else its result line's (the stream's last ``result`` before the turn's record)."""
    history = History(turns)
    history.feed(read_tail(path)[0])
    return history.points


@attrs.define
class History:
    """The last turns of one log, fed its lines in order."""

    turns: int = TURNS
    points: list[TurnPoint] = attrs.field(factory=list)
    _result: dict[str, Any] | None = None

    def feed(self, lines: list[bytes]) -> None:
        for obj in objects(lines):
            kind = obj.get("type")
            if kind == "result":
                self._result = obj
            elif kind == "hive_start":
                self._result = None
            elif kind == "hive" and isinstance(obj.get("turn"), int):
                self.points.append(_point(obj, self._result or {}))
                self._result = None
        del self.points[: -self.turns]


def _point(record: dict[str, Any], result: dict[str, Any]) -> TurnPoint:
    usage = record.get("tokens") or result.get("usage") or {}
    tokens = sum(v for k, v in usage.items() if k in ("input_tokens", "output_tokens") and _count(v))
    cost = record.get("cost_usd")  # the result's total_cost_usd is the session's so far, not the turn's
    return TurnPoint(
        turn=record["turn"],
        ended=float(record.get("ended") or 0),
        tokens=tokens,
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0,
    )


@attrs.define
class _Followed:
    inode: int
    offset: int
    partial: bytes
    history: History


@attrs.define
class Histories:
    """The last turns of many logs, each read once: later calls read only what was appended
    (at most `TAIL_BYTES` of it), so a page updated every few seconds over 100 agents reads
    what changed, not 100 logs' ends. Its memory is `TURNS` points a log."""

    _logs: dict[Path, _Followed] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    """Pages read from worker threads of their own."""

    def points(self, path: Path) -> list[TurnPoint]:
        """The last turns of the log at ``path`` (blocking: it reads the file)."""
        with self._lock:
            return self._points(path)

    def _points(self, path: Path) -> list[TurnPoint]:
        fd = open_regular(path)
        if fd is None:
            self._logs.pop(path, None)
            return []
        try:
            found = os.fstat(fd)
            followed = self._logs.get(path)
            if followed is None or followed.inode != found.st_ino or found.st_size < followed.offset:
                followed = self._logs[path] = _Followed(
                    found.st_ino, max(0, found.st_size - TAIL_BYTES), b"", History()
                )
                skip_first = followed.offset > 0
            else:
                skip_first = False
            start = max(followed.offset, found.st_size - TAIL_BYTES)
            if start > followed.offset:  # more was appended than is read: what is skipped is lost
                followed.partial, skip_first = b"", True
            data = os.pread(fd, found.st_size - start, start)
        finally:
            os.close(fd)
        followed.offset = start + len(data)
        *lines, followed.partial = (followed.partial + data).split(b"\n")
        followed.history.feed(lines[1:] if skip_first and lines else lines)
        return list(followed.history.points)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
