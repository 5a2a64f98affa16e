"""The types of the flags that take seconds, each refusing what makes no sense with its own reason."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from hive._limits import MAX_WAIT
from hive._when import in_seconds


def number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


def seconds_flag(refusal: Callable[[float], str | None]) -> Callable[[str], float]:
    """A flag's type: a number of seconds, refused with ``refusal(value)`` where that says why."""

    def seconds(text: str) -> float:
        value = number(text)
        why = refusal(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{text!r} {why}")
        return value

    return seconds


wait = seconds_flag(
    lambda value: f"is negative; give 0 (answer at once) to {MAX_WAIT:g}" if value < 0 else None
)
timeout = seconds_flag(
    lambda value: "must be more than 0 seconds; leave --timeout out for none" if value <= 0 else None
)
demo_within = seconds_flag(
    lambda value: "must be more than 0 seconds: give the seconds the demo may take" if value <= 0 else None
)


def capped_wait(seconds: float) -> tuple[float, str | None]:
    """A ``--wait`` within the cap the tools keep: ``seconds``, or :data:`MAX_WAIT` with the note
    that tells the operator so (the daemon would cap it too, without a word)."""
    if seconds <= MAX_WAIT:
        return seconds, None
    return (
        MAX_WAIT,
        f"--wait {seconds:g} is over the cap of {in_seconds(MAX_WAIT)}: waiting {in_seconds(MAX_WAIT)} at most",
    )
