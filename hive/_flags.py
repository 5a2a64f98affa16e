"""The command-line flags several of hive's programs share, written once.

Standard library only (with ``hive.errors``): ``hive-bash-mcp`` (the relay) reads its flags with
these and starts in the time of a bare interpreter, and ``hive run`` reads its settings with them
before it spawns its agent.

A turn's settings (``--idle-timeout``, ``--stop-grace``, ``--compact-at``) are read by
``hive run`` and ``hive-agent`` alike: each reader takes the text given and returns its value or
raises ``ValueError`` saying why it is refused, and :func:`setting` names where the text came from
(the flag, or ``hive-agent``'s environment variable) in the error that ends the program (exit 2).
A program's flag that is not given falls back to its environment variable (`from_environment`,
`yes_no`): ``hive-agent`` and ``hive-bash-daemon`` read theirs so.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from hive.errors import BadInput

__all__ = [
    "LOG_LEVELS",
    "LOG_LEVEL_HELP",
    "OFF",
    "add_log_level",
    "compact_at",
    "from_environment",
    "idle_timeout",
    "log_level",
    "positive_seconds",
    "setting",
    "stop_grace",
    "yes_no",
]

T = TypeVar("T")

LOG_LEVELS = ("debug", "info", "warning", "error")
"""What ``--log-level`` takes."""
LOG_LEVEL_HELP = (
    "what to log on stderr: debug, info (what it starts and stops, each turn or task), warning "
    "(what goes wrong but is survived) or error [HIVE_LOG_LEVEL; default info]"
)
OFF = ("off", "never", "none")
"""What ``--compact-at`` takes for never."""


def positive_seconds(text: str) -> float:
    """``text`` as a finite number of seconds more than 0 (an ``argparse`` type: a bad one is an
    ``ArgumentTypeError`` saying so)."""
    value = _number(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def log_level(text: str) -> str:
    """``--log-level`` (or ``HIVE_LOG_LEVEL``, its default): one of `LOG_LEVELS`, in any case (an
    ``argparse`` type, which argparse also applies to a default given as a string)."""
    if text.strip().lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a log level: give one of {', '.join(LOG_LEVELS)} "
            "(with --log-level, or in HIVE_LOG_LEVEL)"
        )
    return text.strip().lower()


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def idle_timeout(text: str) -> float:
    """``--idle-timeout``: a finite number of seconds above 0."""
    seconds = _number(text)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{text!r} is not a number of seconds above 0; leave it out for never")
    return seconds


def stop_grace(text: str) -> float:
    """``--stop-grace``: a finite number of seconds, 0 or more."""
    seconds = _number(text)
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(
            f"{text!r} is not a number of seconds of 0 or more (0: not waiting for the agent's own end)"
        )
    return seconds


def compact_at(text: str) -> float | None:
    """``--compact-at``: a fraction of the context window in (0, 1], or ``off`` (None: never)."""
    if text.strip().lower() in OFF:
        return None
    fraction = _number(text)
    if not 0 < fraction <= 1:
        raise ValueError(f"{text!r} is not a fraction of the context window in (0, 1] (e.g. 0.8), nor 'off'")
    return fraction


def yes_no(text: str) -> bool:
    """A switch's variable (``HIVE_WITH_BASH_DAEMON=1``): 1, true, yes or on; 0, false, no or off."""
    if text.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if text.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a yes or no; use 1 or 0")


Refusal = Callable[[str], BaseException]
"""What a refused setting raises, given ``<where>: <why>``: a ``BadInput`` (exit 2), or an
``argparse`` parser's ``error`` (its usage, exit 2)."""


def setting(where: str, text: str, read: Callable[[str], T], error: Refusal = BadInput) -> T:
    """``text`` read by ``read``; if refused (``ValueError`` or ``argparse.ArgumentTypeError``),
    ``error`` saying ``<where>: <why>``, ``where`` being the flag or the variable the text came from."""
    try:
        return read(text)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise error(f"{where}: {exc}") from None


def from_environment(
    variable: str,
    read: Callable[[str], T],
    default: T,
    *,
    env: Mapping[str, str] = os.environ,
    error: Refusal = BadInput,
) -> T:
    """``variable``'s text read by ``read`` (see `setting`); ``default`` where it is unset or blank."""
    text = env.get(variable)
    return setting(variable, text, read, error) if text else default


def add_log_level(parser: argparse.ArgumentParser) -> None:
    """Give a daemon's ``parser`` the flag ``--log-level`` (``HIVE_LOG_LEVEL``, default info)."""
    parser.add_argument(
        "--log-level",
        default=os.environ.get("HIVE_LOG_LEVEL") or "info",
        type=log_level,
        metavar="LEVEL",
        help=LOG_LEVEL_HELP,
    )
