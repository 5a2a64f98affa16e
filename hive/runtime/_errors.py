"""The errors of driving an agent's turns, each saying what to do about it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class HiveRuntimeError(Exception):
    """Base of the runtime layer's errors."""


class SpecError(HiveRuntimeError, ValueError):
    """A runtime setting (HIVE_RUNTIME, HIVE_ACP_*) is malformed; the message names the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


class AgentUnavailable(HiveRuntimeError, OSError):
    """The agent's executable could not be started."""


class AgentRefused(HiveRuntimeError):
    """The agent answered, but cannot serve as a hive runtime (e.g. it lacks a capability)."""


class TurnFailed(HiveRuntimeError):
    """A turn could not be run at all (as opposed to a turn that ended in an error result)."""


class IdleTimeout(TurnFailed):
    """The agent sent nothing for the idle timeout and the turn was stopped."""


class IdleKilled(IdleTimeout):
    """As IdleTimeout, and the agent did not answer the stop, so it was sent SIGINT."""


@contextlib.contextmanager
def one_error() -> Iterator[None]:
    """The error boundary of a context manager that runs a nursery: when one exception is all
    that went wrong (a failure to start, the caller's own error), it comes out alone rather
    than wrapped in an exception group."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
