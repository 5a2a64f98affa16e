"""The command-line flags several of hive's programs share, written once.

Standard library only: ``hive-bash-mcp`` (the relay) reads its flags with these and starts in
the time of a bare interpreter.
"""

from __future__ import annotations

import argparse
import os

__all__ = ["LOG_LEVELS", "add_log_level", "positive_seconds"]

LOG_LEVELS = ("debug", "info", "warning", "error")
"""What ``--log-level`` takes."""


def positive_seconds(text: str) -> float:
    """``text`` as a number of seconds more than 0 (an ``argparse`` type: a bad one is an
    ``ArgumentTypeError`` saying so)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_log_level(parser: argparse.ArgumentParser) -> None:
    """Give a daemon's ``parser`` the flag ``--log-level`` (``HIVE_LOG_LEVEL``, default info)."""
    parser.add_argument(
        "--log-level",
        default=os.environ.get("HIVE_LOG_LEVEL", "info"),
        choices=LOG_LEVELS,
        help="[HIVE_LOG_LEVEL; default info]",
    )
