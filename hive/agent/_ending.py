"""How a turn ends: the runtime's account of it, read as the harness's, and its record.

How a turn's end is told (``TurnRecord.outcome``), and whether its messages count as carried:

==============================================  =============  ==================================
``Runtime.run``                                  outcome        its messages
==============================================  =============  ==================================
returns                                          stop reason    carried
raises ``IdleTimeout`` (the turn ran)            ``idle``       carried
raises ``SessionNotFound``                       not started    kept; the session is forgotten
                                                                and the turn retried at once
raises anything else before a result came        not started    kept; retried after a backoff
raises anything else after the result            failed         carried
is cancelled (the harness stops)                 stopped        carried if the agent's result came
==============================================  =============  ==================================

The agent's result is its own: one hive made for an agent that ended without one (marked
``"hive"``) does not count, so such a stopped turn's messages are carried again by the next run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import attrs

from hive import telemetry
from hive._when import counted, span
from hive.agent._harness_files import Outcome, TurnRecord, TurnStart
from hive.agent._log import TurnSink
from hive.runtime import HiveRuntimeError, IdleTimeout, Runtime, SessionNotFound, TurnOutcome

log = logging.getLogger(__name__)


@attrs.frozen
class Ending:
    """How a turn ended, from which the loop decides what comes next."""

    outcome: Outcome
    """The turn log's ``outcome``."""
    delivered: bool
    """The agent got the turn's messages: they count as carried. Else they stay queued, and the
    turn is retried after the backoff."""
    outcome_of: TurnOutcome | None = None
    """The runtime's account of the turn, where it ran to one."""
    error: str | None = None
    retry_at_once: bool = False
    """Retry without the backoff: the session was lost, and the next turn starts a new one."""


def stopped(sink: TurnSink) -> Ending:
    """A turn cancelled: the harness is stopping, and the turn was stopped."""
    return Ending("stopped", sink.saw_result, error="the harness was stopped during the turn")


async def run_turn(runtime: Runtime, prompt: str, sink: TurnSink, trace: telemetry.Trace) -> Ending:
    """Run one turn of ``runtime`` and tell how it ended (the table above)."""
    try:
        outcome = await runtime.run(prompt, trace.sink(sink))
        trace.ended(outcome)
    except IdleTimeout as exc:
        return Ending("idle", True, exc.outcome, str(exc))
    except SessionNotFound as exc:
        log.warning("%s; starting a new session", exc)
        await runtime.archive()
        return Ending("not started", False, error=str(exc), retry_at_once=True)
    except (HiveRuntimeError, OSError) as exc:
        return _failed(sink, str(exc))
    except Exception as exc:
        log.exception("the turn failed")
        return _failed(sink, f"{type(exc).__name__}: {exc}")
    return Ending(outcome.stop_reason.value, True, outcome)


def _failed(sink: TurnSink, error: str) -> Ending:
    return Ending("failed" if sink.saw_result else "not started", sink.saw_result, error=error)


def record_of(start: TurnStart, sink: TurnSink, session_id: str | None, **fields: Any) -> TurnRecord:
    """The end of the turn (or compaction) ``start`` began, as its stream (``sink``) told it."""
    usage = sink.usage
    return TurnRecord(
        turn=start.turn,
        kind=start.kind,
        started=start.started,
        ended=time.time(),
        carried=start.carried,
        requested_by=start.requested_by,
        session_id=session_id,
        context_used=usage.used if usage else None,
        context_size=usage.size if usage and usage.size else None,
        cost_usd=sink.cost.usd,
        session_cost_usd=sink.cost.session.usd,
        **fields,
    )


def turn_record(start: TurnStart, sink: TurnSink, session_id: str | None, ending: Ending) -> TurnRecord:
    """The end of a turn, as its stream and the runtime told it."""
    outcome = ending.outcome_of
    return record_of(
        start,
        sink,
        session_id or sink.session_id,
        outcome=ending.outcome,
        delivered=ending.delivered,
        is_error=outcome.is_error if outcome else True,
        error=ending.error or ("; ".join(outcome.errors) if outcome and outcome.errors else None),
        result=outcome.result if outcome else None,
        tokens=dict(outcome.tokens) if outcome else {},
    )


def log_turn(record: TurnRecord, error: str | None) -> None:
    """The turn's one line in the harness's log: its number, what it carried, how it ended
    (a warning, with the error, when it did not end well)."""
    senders = ", ".join(dict.fromkeys(item.sender for item in record.carried))
    count = len(record.carried)
    carried = f"carried {counted(count, 'message')} (from {senders})" if count else "carried nothing"
    line = f"turn {record.turn}: {carried}; {record.outcome} after {span(record.ended - record.started)}"
    if error:
        log.warning("%s: %s", line, error)
    else:
        log.info("%s", line)
