from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from hive import telemetry
from hive._files import fsync_dir
from hive.agent._arrivals import QueueWrites, judged, source
from hive.agent._ending import Ending, log_turn, record_of, run_turn, stopped, turn_record
from hive.agent._harness_files import (
    Carried,
    Compacted,
    CompactRequested,
    Outcome,
    TurnKind,
    TurnRecord,
    TurnStart,
)
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
    admit,
    advance,
    next_step,
)
from hive.agent._prompt import render_prompt
from hive.agent._queue import QueueFile, carried_by, carry, open_queue_file
from hive.agent._session import SessionStore, resumed_cost
from hive.agent._stop_grace import StopGrace
from hive.agent_socket import AgentRequest, AgentState, AgentStatus, Compact, Prompt, Refused, Status, Wake
from hive.runtime import HiveRuntimeError, Runtime
from hive.sink import ContextUsage, SessionCost

log = logging.getLogger(__name__)

RETRY_FIRST = 1.0
RETRY_MAX = 60.0

_STATES: dict[Phase, AgentState] = {
    Phase.IDLE: "idle",
    Phase.TURN: "turn",
    Phase.RECORDING: "turn",
    Phase.COMPACTING: "compacting",
    Phase.BACKOFF: "retrying",
}


@attrs.define(eq=False)
class Harness:
    """One agent's turns: what arrives is queued on disk and answered, and each turn carries what is queued, through the runtime, into the turn log."""

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
    _writes: QueueWrites = attrs.field(init=False)
    _retry_delay: float = 0.0
    _grace: StopGrace = attrs.field(factory=StopGrace)
    _last_turn: TurnRecord | None = None
    """The last turn (not compaction) whose end is known: it judges the wakes shown in it."""

    def __attrs_post_init__(self) -> None:
        self._writes = QueueWrites(self.queue)
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
        if message.shown:  # answered inline: settled now by the turn it was answered in, or queued
            settled = judged(message, self.state.phase, self.running, self._last_turn)
            if settled is None:
                if message.end_id is not None:
                    self._apply(SeenInline(message.end_id))
                return
            message = settled
        self.state, admission = admit(self.state, attrs.evolve(message, at=time.time()))
        if isinstance(admission, Admitted):
            seq = admission.item.seq
            self._writes.want(seq)
            telemetry.wake_received(source(message.kind, message.sender), self.state.waiting())
        elif admission.original is not None:
            seq = admission.original  # answered once the original is written
        else:
            log.info("dropped a repeat of end %s from %s", message.end_id, message.sender)
            return
        await self._writes.wait(seq)

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
        """What the harness is doing and what its last turn did, for the agent socket's ``status``."""
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
            nursery.start_soon(self._writes.serve, lambda: self.state.pending, self._apply)
            nursery.start_soon(self._grace.watch)
            task_status.started()
            await self._run_turns()

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

    def _traced(
        self, start: TurnStart, trigger: str, links: list[str] | None = None
    ) -> AbstractContextManager[telemetry.Trace]:
        return telemetry.traced_turn(
            self.name,
            provider=self.provider,
            number=start.turn,
            trigger=trigger,
            kind=start.kind,
            links=links or (),
            cost=self.cost,
        )

    def _ended(self, record: TurnRecord) -> None:
        """The running turn's end is the last one: both change at once, for ``status``."""
        self.last, self.running = record, None

    async def _turn(self, items: tuple[Item, ...]) -> None:
        start = await self._start("turn", items)
        sink = self.log.turn_sink(self._usage, self.cost)
        prompt = render_prompt(items, self.budget)
        ending: Ending | None = None
        telemetry.queue_depth(self.state.waiting())
        try:
            senders = ", ".join(dict.fromkeys(i.sender for i in items))
            with self._traced(start, senders, [i.traceparent for i in items if i.traceparent]) as trace:
                ending = await run_turn(self.runtime, prompt, sink, trace)
        finally:
            with trio.CancelScope(deadline=self._grace.deadline(), shield=True) as self._grace.ending:
                await self._end_turn(start, sink, ending or stopped(sink))

    async def _end_turn(self, start: TurnStart, sink: TurnSink, ending: Ending) -> None:
        record = self._last_turn = turn_record(start, sink, self.runtime.session_id, ending)
        await self._keep_session(sink)  # first: a turn in the log is never measured again after a restart
        log_turn(record, ending.error)
        await self.log.record(record)
        self._apply(TurnEnded(ending.delivered))
        if ending.outcome == "not started" and self.turns == start.turn:
            self.turns -= 1  # no turn ran: the next one (its retry) is numbered as this one was
        if not ending.delivered:
            self._ended(record)
            self._retry_delay = 0.0 if ending.retry_at_once else self._next_delay()
            return
        self._retry_delay = 0.0
        # The wakes it showed leave with what it carried: each written first, so that its line
        # comes before the one that carries it away. (Not while stopping, when the writes may have
        # stopped: one left behind is replayed as an ordinary wake, told twice but not lost.)
        if not self._grace.stopping:
            await self.wait_state(lambda state: not any(i.shown for i in state.pending))
        shown = tuple(i.seq for i in self.state.shown())
        # Not recorded: a restart carries these again (at least once, never lost).
        await self._append(Carried(tuple(i.seq for i in start.carried) + shown), "")
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
        sink = self.log.turn_sink(self._usage, self.cost)
        error: str | None = None
        outcome: Outcome = "stopped"
        try:
            with self._traced(start, ", ".join(by)) as trace:
                await self.runtime.compact(trace.sink(sink))
            outcome = "completed"
        except (HiveRuntimeError, OSError) as exc:
            outcome, error = "failed", str(exc)
        except Exception as exc:
            log.exception("the compaction failed")
            outcome, error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            with trio.CancelScope(deadline=self._grace.deadline(), shield=True) as self._grace.ending:
                record = record_of(
                    start,
                    sink,
                    self.runtime.session_id,
                    outcome=outcome,
                    is_error=outcome != "completed",
                    error=error,
                )
                if error:
                    log.warning("compaction %d failed: %s", start.turn, error)
                await self._keep_session(sink)
                await self.log.record(record)
                if outcome != "stopped":  # a stopped one is owed still: a restart runs it
                    await self._append(Compacted(), ": a restart compacts again")
                self._ended(record)
                self._apply(CompactEnded())

    # -- beside the turns ------------------------------------------------------------------------

    async def _append(self, line: Carried | Compacted, meanwhile: str) -> None:
        """Append ``line`` to the queue's file; if it cannot be, say so (``meanwhile``: what then)."""
        try:
            await self.queue.append([line])
        except OSError as exc:
            log.error("%s%s", exc, meanwhile)  # noqa: TRY400 - the message says it all

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
