"""An agent's last turns, read from the end of its turn log: the tokens and cost of each (the
fleet page's small chart), and the log's last lines to render (an agent's page)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import attrs

from hive._follow import FollowedFile

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
    history.follow(FollowedFile(path, TAIL_BYTES))
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

    def follow(self, followed: FollowedFile) -> None:
        """Fed what was appended to ``followed`` since its last read (a file replaced: anew)."""
        while (appended := followed.read(TAIL_BYTES)).read or appended.restarted:
            if appended.restarted:
                self.points, self._result = [], None
            self.feed(appended.lines)


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
class Histories:
    """The last turns of many logs, each read once: later calls read only what was appended,
    so a page updated every few seconds over 100 agents reads
    what changed, not 100 logs' ends. Its memory is `TURNS` points a log."""

    _logs: dict[Path, tuple[FollowedFile, History]] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    """Pages read from worker threads of their own."""

    def points(self, path: Path) -> list[TurnPoint]:
        """The last turns of the log at ``path`` (blocking: it reads the file)."""
        with self._lock:
            return self._points(path)

    def _points(self, path: Path) -> list[TurnPoint]:
        followed, history = self._logs.setdefault(path, (FollowedFile(path, TAIL_BYTES), History()))
        history.follow(followed)
        return list(history.points)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
