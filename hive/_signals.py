"""SIGINT and SIGTERM recorded, not acted on, until a program can act on them.

A program that a stop must not cut short midway (``hive run`` before its agent is adopted,
``hive-agent`` before its imports are done and its Trio receiver is open) records them from its
first instruction; Trio's signal receiver takes them over once open (and hands the recorder back
when it closes), and the program acts on what was recorded first. A signal inherited as ignored
(a script's background job) is recorded too: SIGINT stops these programs wherever they run.

Standard library only: it runs before the program's own imports.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOPS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def recording_signals(into: list[signal.Signals] | None = None) -> Iterator[list[signal.Signals]]:
    """SIGINT and SIGTERM recorded (in ``into``, else a new list), not acted on, inside the block;
    the handlers before it are handed back at its end."""
    received = [] if into is None else into

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum))

    previous = {signum: signal.signal(signum, record) for signum in STOPS}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exiting_quietly_on_stops() -> None:
    """Until the program's own handlers take over, SIGINT or SIGTERM ends it at once with status
    0, as a daemon's stop does, and no traceback: for a daemon whose imports a stop may cut short,
    which has nothing to finish yet."""

    def exit_now(signum: int, frame: FrameType | None) -> None:
        os._exit(0)

    for signum in STOPS:
        signal.signal(signum, exit_now)
