"""Times for a person: a length of time (``3 min 5 s``) and a moment (``09:59:48``). Standard library only."""

from __future__ import annotations

import time

__all__ = ["clock", "span"]


def span(seconds: float) -> str:
    """A length of time for a person: ``2.5 s``, ``42 s``, ``3 min 5 s``, ``2 h 5 min``, ``3 d 4 h``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def clock(stamp: float, now: float) -> str:
    """``stamp`` as local time: the time of day if it is ``now``'s day, else the date too."""
    when, today = time.localtime(stamp), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M:%S", when)
    return time.strftime("%Y-%m-%d %H:%M:%S", when)
