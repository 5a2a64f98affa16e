"""The harness's core: messages in, turns out, through one Runtime.

:class:`Harness` takes every decision through the pure model (``hive.agent._model``) and does
what it says: it writes admitted messages to the queue's file (and acknowledges them once they
are there), runs a turn carrying everything queued, runs the compaction asked for, records
each turn's end in the queue's file and the turn log, and keeps the session id for a restart.

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

A failure is logged with its reason, and the loop goes on; the runtime respawns its agent
for the next turn. A turn that did not start gives its number back: its retry is numbered as it
was, so the turns are numbered as they ran (a refused agent's tries do not count up).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from hive import telemetry
from hive._files import fsync_dir
from hive._when import counted, span
from hive.agent._log import TurnLog, TurnSink
from hive.agent._model import (
    Admitted,
    Arrived,
    CompactAsked,
    CompactEnded,
    Event,
    Item,
    ItemKind,
    LoopState,
    Phase,
    Recorded,
    RetryDue,
    SeenInline,
    StartCompact,
    TurnEnded,
    WriteFailed,
    Written,
    admit,
    advance,
    next_step,
)
from hive.agent._prompt import render_prompt
from hive.agent._queue import QueueFile, carried_by, carry, open_queue_file
from hive.agent._session import SessionStore, resumed_cost
from hive.agent._wire import (
    Added,
    Carried,
    Compacted,
    CompactRequested,
    Outcome,
    TurnKind,
    TurnRecord,
    TurnStart,
)
from hive.runtime import HiveRuntimeError, IdleTimeout, Runtime, SessionNotFound, TurnOutcome
from hive.sink import ContextUsage, SessionCost
from hive.wake import AgentRequest, AgentState, AgentStatus, Compact, Prompt, Refused, Status, Wake

log = logging.getLogger(__name__)

STOP_GRACE = 15.0
"""Stopping: how long the end of a turn may take to be written down once the harness stops."""
RETRY_FIRST = 1.0
RETRY_MAX = 60.0

_STATES: dict[Phase, AgentState] = {
    Phase.IDLE: "idle",
    Phase.TURN: "turn",
    Phase.RECORDING: "turn",
    Phase.COMPACTING: "compacting",
    Phase.BACKOFF: "retrying",
}


@attrs.frozen
class _Ending:
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


def _log_turn(record: TurnRecord, error: str | None) -> None:
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


@attrs.define(eq=False)
class _Write:
    done: trio.Event = attrs.field(factory=trio.Event)
    error: str | None = None


@attrs.define(eq=False)
class Harness:
    runtime: Runtime
    queue: QueueFile
    log: TurnLog
    sessions: SessionStore
    state: LoopState
    budget: int
    """The most bytes of messages one turn carries (at least one message, cut to this)."""
    state_dir: Path | None = None
    retry_first: float = RETRY_FIRST
    retry_max: float = RETRY_MAX
    name: str = "hive"
    """The agent's name in its telemetry (``invoke_agent <name>``)."""
    provider: str = "anthropic"
    """Who serves the agent's model, for its telemetry (an ACP agent's stream names itself)."""
    turns: int = 0
    """The number of the last turn started (turns and compactions, over restarts)."""
    last: TurnRecord | None = None
    """The end of the last turn (or compaction) that ended (over restarts)."""
    running: TurnStart | None = None
    """The start of the turn (or compaction) running; None once its end is ``last``."""
    context: ContextUsage | None = None
    cost: SessionCost = attrs.field(factory=SessionCost)
    """The session's cost so far, as its agent last reported it: each turn's cost is measured
    from it (a restarted harness takes it from the session file)."""
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _observed: trio.Event = attrs.field(factory=trio.Event)
    _written: trio.Event = attrs.field(factory=trio.Event)
    _writes: dict[int, _Write] = attrs.field(factory=dict)
    _retry_delay: float = 0.0
    _ending: trio.CancelScope | None = None
    """The scope the last turn's end was written down in: shielded, given `STOP_GRACE` by a stop."""
    _stopping: bool = False
    _last_turn: TurnRecord | None = None
    """The last turn (not compaction) whose end is known: it judges the wakes shown in it."""

    def __attrs_post_init__(self) -> None:
        if self.last is not None and self.last.kind == "turn":
            self._last_turn = self.last

    # -- what arrives ----------------------------------------------------------------------------

    async def handle(self, request: AgentRequest) -> AgentStatus | None:
        """The agent socket's handler."""
        match request:
            case Wake(sender=sender, body=body, end_id=end_id, traceparent=traceparent, shown_at=shown_at):
                await self.put(
                    Arrived(ItemKind.WAKE, sender, body, end_id, traceparent=traceparent, shown_at=shown_at)
                )
            case Prompt(text=text) if not text.strip():
                raise Refused("the prompt is empty (or only blanks): nothing was queued; send words")
            case Prompt(text=text, sender=sender):
                await self.put(Arrived(ItemKind.PROMPT, sender, text))
            case Compact():
                await self.ask_compact("operator")
            case Status():
                return self.status()
        return None

    async def put(self, message: Arrived) -> None:
        """Queue a message, stamped with the time it arrived; return once it is in the queue's file
        (or is a repeat of one that is). Refused if it could not be written."""
        judged = self._judged(message) if message.shown else message
        if judged is None:
            return
        self.state, admission = admit(self.state, attrs.evolve(judged, at=time.time()))
        if isinstance(admission, Admitted):
            write = self._writes[admission.item.seq] = _Write()
            self._written.set()
            telemetry.wake_received(_source(message.kind, message.sender), self.state.waiting())
        elif admission.original is not None:
            write = self._writes[admission.original]  # answered once the original is written
        else:
            log.info("dropped a repeat of end %s from %s", message.end_id, message.sender)
            return
        await write.done.wait()
        if write.error is not None:
            raise Refused(f"the harness could not queue it: {write.error}")

    def _judged(self, message: Arrived) -> Arrived | None:
        """A wake whose end was answered inline: the running turn's to settle if it was answered
        in it; else settled now by the turn it was answered in, if that one ended delivered
        (None: nothing to queue); else an ordinary wake (that turn did not deliver, or is not
        known: a harness that crashed meanwhile)."""
        shown_at = message.shown_at
        assert shown_at is not None
        running = self.running
        if self.state.phase is Phase.TURN and running is not None and running.started <= shown_at:
            return message
        ended = self._last_turn
        if ended is not None and ended.delivered and ended.started <= shown_at <= ended.ended:
            log.info("end %s was shown in turn %d, which delivered it", message.end_id, ended.turn)
            if message.end_id is not None:
                self._apply(SeenInline(message.end_id))
            return None
        return attrs.evolve(message, shown_at=None)

    async def ask_compact(self, by: str) -> None:
        """Compact at once when idle, else right after the running turn; return once the request
        is in the queue's file (a restart runs it if it has not ended). Refused if it could not
        be written."""
        with trio.CancelScope(shield=True):  # written and not taken in would wait for a restart
            try:
                await self.queue.append([CompactRequested(by)])
            except OSError as exc:
                log.error("%s", exc)  # noqa: TRY400 - the message says it all
                raise Refused(f"the harness could not queue the compaction: {exc}") from None
            self._apply(CompactAsked(by))

    def status(self) -> AgentStatus:
        last, running, cost = self.last, self.running, self.cost
        return AgentStatus(
            state=_STATES[self.state.phase],
            session_id=self.runtime.session_id,
            queue=self.state.waiting(),
            carrying=len(self.state.carrying),
            turns=self.turns,
            last_stop_reason=last.outcome if last else None,
            last_error=last.error if last else None,
            running_turn=running.turn if running else None,
            running_since=running.started if running else None,
            last_turn=last.turn if last else None,
            last_kind=last.kind if last else None,
            last_started=last.started if last else None,
            last_ended=last.ended if last else None,
            last_cost_usd=last.cost_usd if last else None,
            last_tokens=dict(last.tokens) if last else {},
            session_cost_usd=cost.usd
            if cost.session_id and cost.session_id == self.runtime.session_id
            else None,
            context_used=self.context.used if self.context else None,
            context_size=self.context.size if self.context and self.context.size else None,
            compact_pending=bool(self.state.compact),
            pid=os.getpid(),
            state_dir=os.fspath(self.state_dir) if self.state_dir else None,
        )

    # -- the loops -------------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write what arrives and run turns until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_arrivals)
            nursery.start_soon(self._grace_on_stop)
            task_status.started()
            await self._run_turns()

    async def _grace_on_stop(self) -> None:
        """Once the harness stops, the end being written down has `STOP_GRACE` left. Until then
        it has no deadline: a turn's end waits for the disk (its record made durable) whole."""
        try:
            await trio.sleep_forever()
        finally:
            self._stopping = True
            if self._ending is not None:
                self._ending.deadline = trio.current_time() + STOP_GRACE

    def _grace(self) -> float:
        """The deadline of an end being written down, as it begins (see `_grace_on_stop`)."""
        return trio.current_time() + STOP_GRACE if self._stopping else math.inf

    async def _write_arrivals(self) -> None:
        """Everything admitted while the last write was under way goes out in the next one."""
        while True:
            while not self.state.pending:
                self._written = trio.Event()
                await self._written.wait()
            batch = self.state.pending
            seqs = tuple(item.seq for item in batch)
            try:
                await self.queue.append([Added(item) for item in batch])
            except OSError as exc:
                log.error("%s", exc)  # noqa: TRY400 - the message says it all
                self._apply(WriteFailed(seqs))
                error: str | None = str(exc)
            else:
                self._apply(Written(seqs))
                error = None
            for seq in seqs:
                write = self._writes.pop(seq)
                write.error = error
                write.done.set()

    async def _run_turns(self) -> None:
        while True:
            self.state, step = next_step(self.state, self.budget)
            if step is None:
                await self._changed.wait()
                self._changed = trio.Event()
            elif isinstance(step, StartCompact):
                await self._compact(step.by)
            else:
                await self._turn(step.items)
                if self.state.phase is Phase.BACKOFF:
                    await trio.sleep(self._retry_delay)
                    self._apply(RetryDue())

    def _apply(self, event: Event) -> None:
        self.state = advance(self.state, event)
        self._changed.set()
        self._observed.set()
        self._observed = trio.Event()

    async def wait_state(self, predicate: Callable[[LoopState], bool]) -> LoopState:
        """Wait until the loop's state satisfies ``predicate`` (checked at each change)."""
        while not predicate(self.state):
            await self._observed.wait()
        return self.state

    # -- a turn ----------------------------------------------------------------------------------

    async def _start(self, kind: TurnKind, items: tuple[Item, ...] = (), by: str | None = None) -> TurnStart:
        """Number the turn (or compaction) starting, and write its start to the turn log."""
        self.turns += 1
        start = TurnStart(self.turns, kind, time.time(), carried=items, requested_by=by)
        self.running = start
        with trio.CancelScope(shield=True):  # a start in the log is followed by its end
            await self.log.record(start)
        return start

    def _ended(self, record: TurnRecord) -> None:
        """The running turn's end is the last one: both change at once, for ``status``."""
        self.last, self.running = record, None

    async def _turn(self, items: tuple[Item, ...]) -> None:
        start = await self._start("turn", items)
        number, started = start.turn, start.started
        sink = self.log.turn_sink(self._usage, self.cost)
        prompt = render_prompt(items, self.budget)
        ending: _Ending | None = None
        telemetry.queue_depth(self.state.waiting())
        try:
            with telemetry.traced_turn(
                self.name,
                provider=self.provider,
                number=number,
                trigger=", ".join(dict.fromkeys(i.sender for i in items)),
                links=[i.traceparent for i in items if i.traceparent],
                cost=self.cost,
            ) as trace:
                ending = await self._run(prompt, sink, trace)
        finally:
            if ending is None:  # cancelled: the harness is stopping, and the turn was stopped
                ending = _Ending("stopped", sink.saw_result, error="the harness was stopped during the turn")
            with trio.CancelScope(deadline=self._grace(), shield=True) as self._ending:
                await self._end_turn(number, started, items, sink, ending)

    async def _run(self, prompt: str, sink: TurnSink, trace: telemetry.Trace) -> _Ending:
        try:
            outcome = await self.runtime.run(prompt, trace.sink(sink))
            trace.ended(outcome)
        except IdleTimeout as exc:
            return _Ending("idle", True, exc.outcome, str(exc))
        except SessionNotFound as exc:
            log.warning("%s; starting a new session", exc)
            await self.runtime.archive()
            return _Ending("not started", False, error=str(exc), retry_at_once=True)
        except (HiveRuntimeError, OSError) as exc:
            return self._failed(sink, str(exc))
        except Exception as exc:
            log.exception("the turn failed")
            return self._failed(sink, f"{type(exc).__name__}: {exc}")
        return _Ending(outcome.stop_reason.value, True, outcome)

    @staticmethod
    def _failed(sink: TurnSink, error: str) -> _Ending:
        return _Ending("failed" if sink.saw_result else "not started", sink.saw_result, error=error)

    async def _end_turn(
        self, number: int, started: float, items: tuple[Item, ...], sink: TurnSink, ending: _Ending
    ) -> None:
        outcome = ending.outcome_of
        record = TurnRecord(
            turn=number,
            kind="turn",
            started=started,
            ended=time.time(),
            carried=items,
            outcome=ending.outcome,
            delivered=ending.delivered,
            is_error=outcome.is_error if outcome else True,
            error=ending.error or _errors(outcome),
            session_id=self.runtime.session_id or sink.session_id,
            result=outcome.result if outcome else None,
            context_used=sink.usage.used if sink.usage else None,
            context_size=sink.usage.size if sink.usage and sink.usage.size else None,
            tokens=dict(outcome.tokens) if outcome else {},
            cost_usd=sink.cost.usd,
            session_cost_usd=sink.cost.session.usd,
        )
        self._last_turn = record
        await self._keep_session(sink)  # first: a turn in the log is never measured again after a restart
        _log_turn(record, ending.error)
        await self.log.record(record)
        self._apply(TurnEnded(ending.delivered))
        if ending.outcome == "not started" and self.turns == number:
            self.turns -= 1  # no turn ran: the next one (its retry) is numbered as this one was
        if not ending.delivered:
            self._ended(record)
            self._retry_delay = 0.0 if ending.retry_at_once else self._next_delay()
            return
        self._retry_delay = 0.0
        # The wakes it showed leave with what it carried: each written first, so that its line
        # comes before the one that carries it away. (Not while stopping, when the writes may have
        # stopped: one left behind is replayed as an ordinary wake, told twice but not lost.)
        if not self._stopping:
            await self.wait_state(lambda state: not any(i.shown for i in state.pending))
        shown = tuple(i.seq for i in self.state.shown())
        try:
            await self.queue.append([Carried(tuple(i.seq for i in items) + shown)])
        except OSError as exc:
            # Not recorded: a restart carries these again (at least once, never lost).
            log.error("%s", exc)  # noqa: TRY400 - the message says it all
        self._apply(Recorded())
        self._ended(record)
        if self.queue.wants_rewrite():
            try:
                await self.queue.rewrite()
            except OSError as exc:
                log.error("could not rewrite the queue %s: %s", self.queue.path, exc)  # noqa: TRY400

    def _next_delay(self) -> float:
        self._retry_delay = min(self.retry_max, max(self.retry_first, self._retry_delay * 2))
        return self._retry_delay

    # -- compaction ------------------------------------------------------------------------------

    async def _compact(self, by: tuple[str, ...]) -> None:
        start = await self._start("compact", by=", ".join(by))
        number, started = start.turn, start.started
        sink = self.log.turn_sink(self._usage, self.cost)
        error: str | None = None
        outcome: Outcome = "stopped"
        try:
            with telemetry.traced_turn(
                self.name,
                provider=self.provider,
                number=number,
                trigger=", ".join(by),
                kind="compact",
                cost=self.cost,
            ) as trace:
                await self.runtime.compact(trace.sink(sink))
            outcome = "completed"
        except (HiveRuntimeError, OSError) as exc:
            outcome, error = "failed", str(exc)
        except Exception as exc:
            log.exception("the compaction failed")
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            with trio.CancelScope(deadline=self._grace(), shield=True) as self._ending:
                record = TurnRecord(
                    turn=number,
                    kind="compact",
                    started=started,
                    ended=time.time(),
                    requested_by=start.requested_by,
                    outcome=outcome,
                    is_error=outcome != "completed",
                    error=error,
                    session_id=self.runtime.session_id,
                    context_used=sink.usage.used if sink.usage else None,
                    context_size=sink.usage.size if sink.usage and sink.usage.size else None,
                    cost_usd=sink.cost.usd,
                    session_cost_usd=sink.cost.session.usd,
                )
                if error:
                    log.warning("compaction %d failed: %s", number, error)
                await self._keep_session(sink)
                await self.log.record(record)
                if outcome != "stopped":  # a stopped one is owed still: a restart runs it
                    try:
                        await self.queue.append([Compacted()])
                    except OSError as exc:
                        log.error("%s: a restart compacts again", exc)  # noqa: TRY400
                self._ended(record)
                self._apply(CompactEnded())

    # -- beside the turns ------------------------------------------------------------------------

    def _usage(self, usage: ContextUsage) -> None:
        self.context = usage

    async def _keep_session(self, sink: TurnSink) -> None:
        """Keep the runtime's session and its cost so far for a restart; if a turn stopped early
        left it none, the one the turn's stream named (claude resumes an interrupted session).
        Durably, in a worker thread."""
        self.cost = sink.cost.session
        try:
            await trio.to_thread.run_sync(
                self.sessions.save, self.runtime.session_id or sink.session_id, self.cost
            )
        except OSError as exc:
            log.error("could not keep the session id in %s: %s", self.sessions.path, exc)  # noqa: TRY400


def _source(kind: ItemKind, sender: str) -> str:
    """Where a message came from, for the ``hive.wakes`` metric: a few kinds, not every sender."""
    if kind is not ItemKind.WAKE:
        return str(kind.value)
    for prefix, source in (("bash-task-", "bash"), ("subagent-", "subagent")):
        if sender.startswith(prefix):
            return source
    return "other"


def _errors(outcome: TurnOutcome | None) -> str | None:
    if outcome is None or not outcome.errors:
        return None
    return "; ".join(outcome.errors)


QUEUE_FILE = "queue"
TURN_LOG = "turns.jsonl"
SESSION_FILE = "session"


@asynccontextmanager
async def open_harness(
    runtime: Runtime, state_dir: Path, sessions: SessionStore, *, budget: int, **options: Any
) -> AsyncIterator[Harness]:
    """The harness of ``runtime`` on ``state_dir`` (its queue replayed, its turn log open);
    serve it with ``await nursery.start(harness.serve)``."""
    queue, state = await open_queue_file(state_dir / QUEUE_FILE)
    try:
        tail = TurnLog.read_tail(state_dir / TURN_LOG)
        if delivered := carried_by(state, tail.last):
            # The turn log is the truth of what reached the agent: the queue's line is owed.
            try:
                await queue.append([Carried(delivered)])
            except OSError as exc:
                log.error("%s", exc)  # noqa: TRY400 - the message says it all
            state = carry(state, delivered)
        turn_log = TurnLog.open(state_dir / TURN_LOG)
        # Its name, where it was just made, durable with the queue's and the session's: a power
        # cut does not take the whole log.
        await trio.to_thread.run_sync(fsync_dir, state_dir)
        try:
            yield Harness(
                runtime,
                queue,
                turn_log,
                sessions,
                state,
                budget,
                state_dir,
                turns=tail.turns,
                last=tail.last,
                cost=resumed_cost(sessions.cost, tail.last),
                **options,
            )
        finally:
            with trio.CancelScope(shield=True):
                await turn_log.aclose()
    finally:
        queue.close()
