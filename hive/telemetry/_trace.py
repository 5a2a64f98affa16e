"""What a program and its turns ask of telemetry first: `exporting` sets it up only where the
environment asks for it (`hive.telemetry._setup`), `turn_ids` draws a turn's ids only then, and
`traced_turn` gives `NO_TRACE` where nothing is exported (nothing imported, the sink not wrapped),
else the turn's span (`hive.telemetry._turns`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from hive.telemetry._ids import TurnIds, new_ids, parse_traceparent
from hive.telemetry._state import active, set_active, wanted

if TYPE_CHECKING:
    from hive.runtime import TurnOutcome
    from hive.sink import SessionCost, Sink
    from hive.telemetry._setup import Telemetry


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


@contextmanager
def exporting(service: str, environ: Mapping[str, str] = os.environ) -> Iterator[Telemetry | None]:
    """Export what the environment asks for inside the block (`hive.telemetry._setup.configure`,
    as ``service``), and the rest at its end, however it ends; nothing at all where it asks for none."""
    if not wanted(environ):
        yield None
        return
    from hive.telemetry._setup import configure

    telemetry = configure(service, environ)
    try:
        yield telemetry
    finally:
        if telemetry is not None:
            set_active(None)
            telemetry.shutdown()


def turn_ids(environ: Mapping[str, str] = os.environ) -> TurnIds | None:
    """The ids of a turn's span, drawn now; None where nothing is exported. Under a
    ``TRACEPARENT`` of the caller's, the turn is in the caller's trace. The settings are
    checked now (`hive.telemetry._setup.check`), before an agent is spawned for nothing."""
    if not wanted(environ):
        return None
    from hive.telemetry._setup import check

    check(environ)
    parent = environ.get("TRACEPARENT")
    ids = parse_traceparent(parent) if parent else None
    trace_id, span_id = new_ids()
    return TurnIds(ids[0] if ids else trace_id, span_id, parent if ids else None)
