"""The errors of driving an agent's turns, each saying what to do about it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hive.errors import BadInput, HiveError, leaves

if TYPE_CHECKING:
    from hive.runtime._protocol import TurnOutcome


class HiveRuntimeError(HiveError):
    """Base of the runtime layer's errors (and the backends'): an agent's turn could not be run.

    A program that one of them ends exits 2, as for bad input: the agent cannot be started, is
    refused, does not know the session, or failed before its turn could run."""

    exit_code = 2


class SpecError(HiveRuntimeError, BadInput):
    """A runtime setting (HIVE_RUNTIME, HIVE_ACP_*) is malformed; the message names the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


class AgentUnavailable(HiveRuntimeError, OSError):
    """The agent's executable could not be started."""


class AgentRefused(HiveRuntimeError):
    """The agent answered, but cannot serve as a hive runtime (e.g. it lacks a capability)."""


ROOT_REFUSAL_SIGN = "cannot be used with root/sudo privileges"
"""What claude writes to stderr (and exits 1) when asked to bypass permissions as root without
``IS_SANDBOX=1``; claude-agent-acp's claude child writes it the same way."""

IS_SANDBOX_HINT = (
    "claude refuses to bypass permissions as root (--permission allow): set IS_SANDBOX=1 in its "
    "environment if it runs in a sandbox, or run the agent as another user"
)
"""What to do about that refusal: the words hive adds wherever it reports it."""


def refused_as_root(stderr: str) -> bool:
    """Whether an agent's stderr says it refused to bypass permissions as root."""
    return ROOT_REFUSAL_SIGN in stderr


class RefusedAsRoot(HiveRuntimeError):
    """claude refused to bypass permissions because it runs as root without ``IS_SANDBOX=1``."""

    def __init__(self) -> None:
        super().__init__(IS_SANDBOX_HINT)


class TurnFailed(HiveRuntimeError):
    """A turn could not be run at all (as opposed to a turn that ended in an error result)."""


class IdleTimeout(TurnFailed):
    """The agent sent nothing for the idle timeout and the turn was stopped. ``outcome`` is
    the stopped turn's ``TurnOutcome`` (its result is already in the sink)."""

    def __init__(self, message: str, outcome: TurnOutcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


class IdleKilled(IdleTimeout):
    """As IdleTimeout, and the agent was sent SIGINT."""


class SessionNotFound(TurnFailed, LookupError):
    """The session to continue is unknown to the agent."""

    def __init__(self, session_id: str, detail: str = "") -> None:
        super().__init__(
            f"no session {session_id!r} to continue: the agent does not know it"
            + (f" ({detail})" if detail else "")
            + "; sessions belong to the directory and HOME they were started in. "
            "Run without --session to start a new one."
        )
        self.session_id = session_id


@contextlib.contextmanager
def one_error() -> Iterator[None]:
    """The error boundary of a context manager that runs a nursery: when one exception is all
    that went wrong (a failure to start, the caller's own error), it comes out alone rather
    than wrapped in an exception group."""
    try:
        yield
    except BaseExceptionGroup as group:
        found = list(leaves(group))
        if len(found) == 1:
            raise found[0] from None
        raise
