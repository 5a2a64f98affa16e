"""The Runtime interface every backend implements, and what a turn reports."""

from __future__ import annotations

import enum
from typing import Any, Protocol

import attrs

from hive.sink import ContextUsage, Sink


class StopReason(enum.Enum):
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
    stop_reason: StopReason
    session_id: str | None
    is_error: bool
    synthesized: bool = False
    """Whether the turn's result was made by hive because the agent gave none."""
    usage: ContextUsage | None = None
    tokens: dict[str, Any] = attrs.field(factory=dict)
    """The turn's token counts as the agent reported them."""
    result: str | None = None


class Canceller(Protocol):
    """Stops whatever turn is running (the SIGINT path); does nothing between turns."""

    def cancel(self) -> None: ...


class Choices(Protocol):
    """The models and effort levels on offer now."""

    def models(self) -> tuple[str, ...]: ...

    def efforts(self) -> tuple[str, ...]: ...


class Runtime(Protocol):
    @property
    def session_id(self) -> str | None: ...

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        """One turn."""
        ...

    async def compact(self, sink: Sink) -> None:
        """Compact the session now (the operator's /compact, the agent's compact tool)."""
        ...

    async def archive(self) -> None:
        """End this session; the next turn starts a new one."""
        ...

    def canceller(self) -> Canceller: ...

    def choices(self) -> Choices: ...
