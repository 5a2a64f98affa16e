"""One subagent turn's stream and how it ended: the sink it is written through, and its end.

How a turn can end (``TurnEnd.stop_reason``):

================  ==========================================================================
completed         the agent ended the turn (its result may still be an error)
interrupted       ``interrupt``: the turn's cancel scope was cancelled (the runtime's stop path)
exited            the agent went away without ending it
idle              the runtime's idle watchdog stopped it
failed            it could not run (the agent cannot start, the session is unknown, ...)
daemon_stopped    the daemon was stopped during it (the same stop path as ``interrupted``)
lost              the daemon died during it (found at the next start; its stream ends unfinished)
================  ==========================================================================
"""

from __future__ import annotations

import time

import attrs

from hive.runtime import TurnOutcome
from hive.sink import (
    Batch,
    ContextUsage,
    ResultMessage,
    Sink,
    SystemInit,
    TurnCost,
    first_message,
    structured,
    typed_lines,
)
from hive.subagent._session_records import Current, TurnEnd

TAIL_CHARS = 4000
"""How much of a result's text ``status`` and a wake carry (its end, where a summary usually is)."""


def tail(text: str | None, limit: int = TAIL_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :]


@attrs.define(eq=False)
class TurnSink:
    """Passes the stream on to ``out`` (the turn log) and keeps what the turn's end is told from:
    the session id (from the init line), the last result line, the context usage and the turn's
    cost (measured from its session's before it)."""

    out: Sink
    cost: TurnCost = attrs.field(factory=TurnCost)
    session_id: str | None = None
    result: ResultMessage | None = None
    usage: ContextUsage | None = None
    lines: int = 0

    async def write(self, batch: Batch) -> None:
        await self.out.write(batch)
        self.lines += len(batch)
        if self.session_id is None:
            found = first_message(batch, b'"init"', "system/init")
            if found is not None and isinstance(found[1], SystemInit):
                self.session_id = found[1].session_id
        for _, _, obj in typed_lines(batch, {"result": b'"result"'}):
            message = structured(obj)
            if isinstance(message, ResultMessage):
                self.result = message
                self.session_id = self.session_id or message.session_id
                self.cost.result(message.session_id, message.total_cost_usd)

    async def context_usage(self, usage: ContextUsage) -> None:
        self.usage = usage
        await self.out.context_usage(usage)


def end_of(
    current: Current,
    stop_reason: str,
    *,
    outcome: TurnOutcome | None = None,
    sink: TurnSink | None = None,
    failure: str | None = None,
) -> TurnEnd:
    """The end of the turn ``current``: from the runtime's outcome when ``run`` returned one, else
    from the result line the stream carried, else from ``failure``."""
    end = TurnEnd(
        turn=current.turn,
        number=current.number,
        stop_reason=stop_reason,
        is_error=True,
        started_at=current.started_at,
        ended_at=time.time(),
    )
    if sink is not None:
        end.cost_usd = sink.cost.usd
    usage = outcome.usage if outcome is not None else (sink.usage if sink is not None else None)
    if usage is not None:
        end.context_used, end.context_size = usage.used, usage.size or None
    if outcome is not None:
        end.is_error = outcome.is_error
        end.result = tail(outcome.result)
        end.errors = [tail(e) or "" for e in outcome.errors]
        end.tokens = dict(outcome.tokens)
    elif sink is not None and sink.result is not None:
        result = sink.result
        end.is_error = result.is_error
        end.result = tail(result.result)
        end.errors = [tail(e) or "" for e in result.errors or ()]
        end.tokens = dict(result.usage)
    if failure is not None:
        end.errors.append(tail(failure) or "")
        end.result = end.result or tail(failure)
    return end
