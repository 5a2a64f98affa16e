"""The Runtime interface every backend implements, and what a turn reports.

The contract both backends keep
-------------------------------

``run(prompt, sink)`` runs one turn. Whatever ends a turn that started, its stream goes to
``sink`` in claude's stream-json shape and ends with exactly one ``result`` line, the agent's
own or one made by hive (marked ``"hive": {"synthesized": true, ...}``), before ``run``
returns or raises. A turn that could not start (the last four rows) may have written nothing.

===============================================  =============================================
the turn ended because                            ``run``
===============================================  =============================================
the agent ended it (its result may be an error)  returns, ``StopReason.COMPLETED``
the ``Canceller``                                 returns, ``StopReason.CANCELLED``
the agent went away without ending it             returns, ``StopReason.EXITED``
the idle watchdog (``Config.idle_timeout``)       raises ``IdleTimeout`` (``IdleKilled`` when the
                                                  agent was sent SIGINT), ``.outcome`` attached
a cancel scope around ``run`` was cancelled       raises ``trio.Cancelled`` (after the stop path)
the session to continue is unknown to the agent   raises ``SessionNotFound``
another turn is running on this runtime           raises ``TurnFailed`` (nothing is started)
the agent cannot be started or is refused         raises ``AgentUnavailable`` / ``AgentRefused``
===============================================  =============================================

Every early end takes the same stop path, whoever asked for it: the agent is sent SIGINT
(ACP: ``session/cancel`` first, SIGINT when it has not answered ``Config.cancel_grace``
later), its own end of the turn is read for at most ``Config.stop_grace``, and an agent that
ignores SIGINT is left running (never killed); the next turn starts a new one beside it. A
stop that comes while the turn is being set up (spawning the agent, opening its session) is
kept and acted on at once. Cleanup that must outlive a cancel is shielded, and every shielded
wait has a deadline.

After a completed turn whose context passes ``Config.compaction``'s watermark, ``run`` runs
the checkpoint turn and compacts before it returns. Closing the runtime (leaving its
``open_*`` block) sends SIGINT to every agent process of it still running and waits at most
``Config.close_grace`` for them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from hive.sink import ContextUsage

if TYPE_CHECKING:
    from hive.sink import ResultMessage, Sink


class StopReason(enum.Enum):
    """Why a turn ended."""

    COMPLETED = "completed"
    """The agent ended the turn (its result may still be an error)."""
    CANCELLED = "cancelled"
    """The Canceller stopped it."""
    IDLE = "idle"
    """The idle watchdog stopped it."""
    EXITED = "exited"
    """The agent went away without ending the turn."""


@attrs.frozen
class TurnOutcome:
    """How a turn ended, as ``Runtime.run`` returns it: why, in which session, its result."""

    stop_reason: StopReason
    session_id: str | None
    """The agent's session the turn ran in (the one the next turn resumes)."""
    is_error: bool
    synthesized: bool = False
    """Whether the turn's result was made by hive because the agent gave none."""
    usage: ContextUsage | None = None
    tokens: dict[str, Any] = attrs.field(factory=dict)
    """The turn's token counts as the agent reported them."""
    result: str | None = None
    interrupted: bool = False
    """Whether the agent was sent SIGINT during the turn."""
    errors: tuple[str, ...] = ()
    """The result's errors (what went wrong, for a turn that ended in an error)."""

    @classmethod
    def of_result(
        cls,
        result: ResultMessage,
        *,
        stop_reason: StopReason,
        session_id: str | None,
        usage: ContextUsage | None,
        interrupted: bool,
    ) -> TurnOutcome:
        """The outcome of a turn that ended with ``result`` (the agent's, or one hive made)."""
        return cls(
            stop_reason=stop_reason,
            session_id=session_id,
            is_error=result.is_error,
            synthesized=result.synthesized,
            usage=usage,
            tokens=dict(result.usage),
            result=result.result,
            interrupted=interrupted,
            errors=tuple(result.errors or ()),
        )


class Canceller(Protocol):
    """Stops whatever turn is running (the SIGINT path); does nothing between turns."""

    def cancel(self) -> None:
        """Stop the running turn (its stop path sends the agent SIGINT); nothing between turns."""
        ...


@attrs.define(eq=False)
class Progress:
    """What a runtime is waiting for now (spawning the agent, its ``initialize``, ...), so a
    caller that stops it can say where it stood. ``None`` when it waits for nothing; after a
    wait that ended in an exception (a cancel, say) it still names that wait."""

    waiting_for: str | None = None

    @contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Say the runtime is waiting for ``what`` inside the block."""
        before, self.waiting_for = self.waiting_for, what
        yield
        self.waiting_for = before


class Choices(Protocol):
    """The models and effort levels on offer now."""

    def models(self) -> tuple[str, ...]:
        """The models a turn may be run with."""
        ...

    def efforts(self) -> tuple[str, ...]:
        """The effort levels a turn may be run with."""
        ...


class Runtime(Protocol):
    """An agent's session, driven a turn at a time: what every backend (claude, ACP) offers."""

    @property
    def session_id(self) -> str | None:
        """The agent's session the turns run in (None until one is started or resumed)."""
        ...

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        """One turn."""
        ...

    async def compact(self, sink: Sink) -> None:
        """Compact the session now (the operator's /compact, the agent's compact tool)."""
        ...

    async def archive(self) -> None:
        """End this session; the next turn starts a new one."""
        ...

    def canceller(self) -> Canceller:
        """What stops the running turn (from another task)."""
        ...

    def choices(self) -> Choices:
        """The models and effort levels on offer now."""
        ...
