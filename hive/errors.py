"""The root of every error hive raises, and the categories a process boundary maps to exit codes.

Each package's errors derive from `HiveError` (directly or through its own family, e.g.
`hive.bash.BashError`) and from the stdlib exception of the same meaning (`ValueError` for bad
input, `OSError` for a failing file or socket), so a caller may catch either. This module is a
stdlib-only leaf: every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterator


class HiveError(Exception):
    """Base of every error hive raises on purpose; its message says what to do about it."""

    exit_code: int = 1
    """The exit status a program ends with when this error ends it (see the README's table)."""


class BadInput(HiveError, ValueError):
    """A flag, setting, argument or file given to hive is malformed or out of range."""

    exit_code = 2


class StateBusy(HiveError):
    """Another process owns the state this one needs (a state dir's lock, a socket's path)."""

    exit_code = 2


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """Every exception ``exc`` holds, however deeply grouped, in order; ``exc`` itself when it is
    not an exception group. The one way hive looks inside a group: never only its first."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc
