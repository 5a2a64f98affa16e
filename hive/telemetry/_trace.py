"""A turn's trace as its caller holds it: `traced_turn` gives `NO_TRACE` where nothing is
exported (nothing imported, the sink not wrapped), else the turn's span (`hive.telemetry._turns`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from hive.telemetry._state import active

if TYPE_CHECKING:
    from hive.runtime import TurnOutcome
    from hive.sink import SessionCost, Sink


class Trace(Protocol):
    """What a turn's caller does with its trace: hand its sink through, and say how it ended."""

    def sink(self, inner: Sink) -> Sink:
        """The sink the turn writes to: ``inner``, seen on the way."""
        ...

    def ended(self, outcome: TurnOutcome) -> None:
        """How the turn ended (a turn that raised needs no call: the span says so itself)."""
        ...


class _NoTrace:
    def sink(self, inner: Sink) -> Sink:
        return inner

    def ended(self, outcome: TurnOutcome) -> None:
        pass


NO_TRACE: Trace = _NoTrace()
"""The trace of a turn when nothing is exported: it changes nothing."""


@contextmanager
def traced_turn(
    agent: str,
    *,
    provider: str,
    number: int | None = None,
    trigger: str | None = None,
    kind: str = "turn",
    links: Sequence[str] = (),
    parent: str | None = None,
    cost: SessionCost | None = None,
) -> Iterator[Trace]:
    """The trace of one turn of ``agent`` (`NO_TRACE` where nothing is exported): the span
    ``invoke_agent <agent>``, current while the turn runs, its ``TRACEPARENT`` in the
    environment of every agent the turn spawns. ``trigger``: who the messages it carries came
    from; ``links``: the ``traceparent`` of the spans that caused it (the bash tasks whose wakes
    it carries); ``parent``: the ``traceparent`` it runs under, if any; ``kind``: ``turn`` or
    ``compact``; ``cost``: the session's cost before the turn, from which the turn's cost is
    measured (None: nothing counted of its session yet)."""
    telemetry = active()
    if telemetry is None:
        yield NO_TRACE
        return
    from hive.telemetry._turns import start_turn

    with start_turn(
        telemetry,
        agent,
        provider=provider,
        number=number,
        trigger=trigger,
        kind=kind,
        links=links,
        parent=parent,
        cost=cost,
    ) as turn:
        yield turn
