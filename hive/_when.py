"""Times and counts for a person: a length of time (``2.0 s``, ``3 min 5 s``), a moment
(``09:59:48``) and a count (``1 task``, ``2 tasks``). Standard library only."""

from __future__ import annotations

import time

__all__ = ["clock", "counted", "in_seconds", "span"]

WHOLE_FROM = 10
"""From this many seconds a time is said in whole seconds; below, to a tenth of a second."""


def in_seconds(seconds: float) -> str:
    """A length of time in seconds, the one way every message says one: ``0.5 s``, ``2.0 s``, ``42 s``, ``600 s``."""
    seconds = max(0.0, seconds)
    if round(seconds, 1) < WHOLE_FROM:
        return f"{seconds:.1f} s"
    return f"{round(seconds)} s"


def span(seconds: float) -> str:
    """A length of time for a person: ``2.5 s``, ``42 s``, ``3 min 5 s``, ``2 h 5 min``, ``3 d 4 h``."""
    whole = round(max(0.0, seconds))
    if whole < 60:
        return in_seconds(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def counted(n: int, thing: str, things: str | None = None) -> str:
    """``n`` things for a person: ``1 task``, ``0 tasks``, ``2 tasks``; ``things`` where the plural
    is not ``thing`` + ``s`` (``counted(2, "process", "processes")``)."""
    if n == 1:
        return f"1 {thing}"
    return f"{n} {things if things is not None else thing + 's'}"


def clock(stamp: float, now: float) -> str:
    """``stamp`` as local time: the time of day if it is ``now``'s day, else the date too."""
    when, today = time.localtime(stamp), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M:%S", when)
    return time.strftime("%Y-%m-%d %H:%M:%S", when)
