"""Running subagent turns: each in a task of the daemon's turn nursery.

Each turn runs inside a cancel scope that is its slot's handle: ``interrupt`` cancels it, and
the runtime's stop path (the same one every early end of a turn takes) sends the agent SIGINT,
or ``session/cancel`` on ACP.

A turn opens its runtime, runs one prompt, and closes it (on ACP, closing drops the
connection: SIGINT to the agent's process group). Its stream goes to the session's turn log;
its end goes to the record, and to the caller (see ``_telling``).

A claude turn's slot is held until its claude has exited (an interrupted claude is
``stopping`` until then, and a restarted daemon waits for one the last daemon left running),
so no second claude ever runs on a session while the first is still exiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import attrs
import trio

from hive import telemetry
from hive.runtime import (
    Backend,
    Config,
    HiveRuntimeError,
    IdleTimeout,
    Permission,
    Runtime,
    RuntimeSpec,
    TurnOutcome,
    open_runtime,
)
from hive.sink import JsonlSink, SessionCost, TurnCost
from hive.subagent import _slots
from hive.subagent._agents import Host, TurnAgent
from hive.subagent._caller import Caller
from hive.subagent._ledger import Ledger
from hive.subagent._live import Live
from hive.subagent._session_records import AgentPid, Current, SessionRecord
from hive.subagent._slot_table import SlotTable
from hive.subagent._slots import Arm
from hive.subagent._telling import Teller
from hive.subagent._turns import TurnSink, end_of

log = logging.getLogger(__name__)

Opener = Callable[[RuntimeSpec, Config, "str | None"], AbstractAsyncContextManager[Runtime]]


def open_subagent_runtime(
    spec: RuntimeSpec, config: Config, session_id: str | None
) -> AbstractAsyncContextManager[Runtime]:
    """The runtime a subagent turn runs on: ``hive.runtime.open_runtime``."""
    return open_runtime(spec, config, session_id=session_id)


@attrs.define(eq=False)
class TurnRunner:
    """Starts each turn in ``nursery``, stops one on ``interrupt``, and writes down how each ended."""

    ledger: Ledger
    slots: SlotTable
    teller: Teller
    host: Host
    opener: Opener
    stop_grace: float
    """After SIGINT, how long a turn's stop path reads the agent's own end (``Config.stop_grace``)."""
    live: dict[str, Live] = attrs.field(factory=dict)
    stopping: bool = False
    """The daemon is stopping: a turn cancelled now ended ``daemon_stopped``, not ``interrupted``."""
    nursery: trio.Nursery | None = None

    def launch(
        self, live: Live, prompt: str, caller: Caller, spec: RuntimeSpec, fresh: SessionRecord | None
    ) -> None:
        """Run the claimed turn ``live`` (in the background); ``fresh`` is a new session's record."""
        assert self.nursery is not None, "the manager is not serving"
        previous = self.live.get(live.name)
        self.live[live.name] = live
        self.nursery.start_soon(self._turn, _Launch(live, prompt, caller, spec, fresh, previous))

    def stop(self, live: Live, scope: trio.CancelScope) -> str:
        """Cancel the turn ``live`` (its slot's decision was to cancel ``scope``); what its stop
        path sends: ``SIGINT``, ``session/cancel``, or ``nothing`` before its agent started."""
        live.interrupted_at = time.time()
        sent = "session/cancel" if live.arm is Arm.ACP else "SIGINT"
        if not live.agents:
            sent = "nothing"  # the turn had not started its agent yet: it stops before
        record = self.ledger.records.get(live.name)
        if live.arm is Arm.CLAUDE and record is not None and record.current is not None:
            for pid in record.current.agents:
                pid.signalled = True
            self.ledger.save(record)
        scope.cancel()
        if not live.opened:
            live.setup.cancel()
        return sent

    def _config(self, caller: Caller, record: SessionRecord) -> Config:
        try:
            permission = Permission(caller.permission)
        except ValueError:
            permission = Permission.DEFAULT
        env = {k: v for k, v in caller.env.items() if k != "CLAUDECODE"}
        return Config(
            cwd=Path(caller.cwd),
            model=record.model,
            effort=record.effort,
            idle_timeout=caller.idle_timeout,
            stop_grace=self.stop_grace,
            permission=permission,
            env=tuple(env.items()),
        )

    async def _turn(self, launch: _Launch) -> None:
        """One turn's task: it runs the turn, tells its end, and holds a claude turn's slot
        until its claude has exited."""
        live, turn = launch.live, _Run()
        try:
            try:
                await self._run(launch, turn)
            except IdleTimeout as exc:
                turn.outcome, turn.reason = exc.outcome, "idle"
            except (HiveRuntimeError, OSError, _Failed) as exc:
                turn.failure, turn.reason = str(exc), "failed"
            except trio.Cancelled:
                self._finish(live, turn, "daemon_stopped")
                raise
            except Exception as exc:
                # A bug of hive's ends this turn only, never the daemon and the other turns.
                log.exception("%s: the turn failed", live.name)
                turn.failure, turn.reason = f"the subagent daemon failed: {exc!r}", "failed"
            if turn.outcome is None and (live.scope.cancelled_caught or live.setup.cancelled_caught):
                turn.reason = "daemon_stopped" if self.stopping else "interrupted"
            self._finish(live, turn, turn.reason)
            await self._await_exits(live)
        finally:
            live.done.set()
            if self.live.get(live.name) is live:
                del self.live[live.name]

    async def _run(self, launch: _Launch, turn: _Run) -> None:
        live, name = launch.live, launch.live.name
        with live.setup:
            # One turn task per name at a time: an ACP turn interrupted a moment ago frees the
            # name at once, but its task still ends its turn and drops its agent.
            if launch.previous is not None:
                await launch.previous.done.wait()
            record = launch.fresh if launch.fresh is not None else self.ledger.records[name]
            self.ledger.records[name] = turn.record = record
            live.number = record.turns = record.turns + 1
            record.current = Current(live.turn, live.number, live.started_at)
            if not self.ledger.save(record):
                # Its agent's pid could not be kept: no turn runs that a restart could not find.
                raise _Failed(
                    f"cannot save the record of subagent {name!r} in {self.ledger.store.sessions} "
                    "(see the daemon's log): free space there (or fix the disk), then continue it"
                )
            log_path = self.ledger.store.log_path(name)
            try:
                out = JsonlSink.to_path(log_path)
            except OSError as exc:
                raise _Failed(f"cannot open the turn log {log_path}: {exc}") from None
            before = SessionCost(record.session_id, record.cost_usd)
            turn.sink = TurnSink(out, TurnCost(before))
            config = self._config(launch.caller, record)
            try:
                with self.host.watching(lambda agent: self._spawned(live, agent)):
                    async with self.opener(launch.spec, config, record.session_id) as runtime:
                        live.opened = True
                        with (
                            live.scope,
                            telemetry.traced_turn(
                                name,
                                provider="anthropic" if launch.spec.backend is Backend.CLAUDE else "acp",
                                number=live.number,
                                trigger="caller",
                                cost=before,
                            ) as trace,
                        ):
                            turn.outcome = await runtime.run(launch.prompt, trace.sink(turn.sink))
                            trace.ended(turn.outcome)
                            turn.reason = turn.outcome.stop_reason.value
                            if live.arm is Arm.CLAUDE:
                                # Closing the runtime SIGINTs a claude still there: let one that
                                # is exiting after its result go in peace, as the runtime would.
                                with trio.move_on_after(config.linger):
                                    for agent in live.agents:
                                        await agent.wait()
            finally:
                with trio.CancelScope(shield=True):
                    await out.aclose()

    def _spawned(self, live: Live, agent: TurnAgent) -> None:
        """An agent of this turn has started (called by the runtime, just after the spawn)."""
        try:
            live.agents.append(agent)
            self.slots.step(live.name, _slots.Spawned(live.turn))
            record = self.ledger.records[live.name]
            if record.current is not None and record.current.turn == live.turn:
                record.current.agents.append(AgentPid(agent.pid, self.host.start_time(agent)))
                self.ledger.save(record)
        except Exception:
            log.exception("%s: could not note the agent pid %d", live.name, agent.pid)

    def _finish(self, live: Live, turn: _Run, reason: str) -> None:
        """The turn has ended: its end into the record, its slot stepped, its caller told."""
        record, sink, outcome = turn.record, turn.sink, turn.outcome
        alive = [agent for agent in live.agents if agent.returncode is None]
        self.slots.step(live.name, _slots.Finished(live.turn, agent_alive=bool(alive)))
        live.carriers = set(live.waiters)
        if record is None:
            live.ended.set()
            return
        current = record.current or Current(live.turn, live.number, live.started_at)
        end = end_of(current, reason, outcome=outcome, sink=sink, failure=turn.failure)
        session_id = (outcome.session_id if outcome else None) or (sink.session_id if sink else None)
        if session_id is not None:
            record.session_id = session_id
        if sink is not None:
            spent = sink.cost.session
            record.cost_usd = spent.usd if spent.session_id == record.session_id else 0.0
        record.current, record.last = None, end
        record.agents = [AgentPid(a.pid, self.host.start_time(a), signalled=a.signalled) for a in alive]
        self.ledger.save(record)
        live.ended.set()
        self.teller.came(record, holds=len(live.carriers))

    async def _await_exits(self, live: Live) -> None:
        """A claude turn's slot is held until its claude has exited."""
        slot = self.slots.slots.get(live.name)
        if slot is None or slot.turn != live.turn or not slot.turn_over:
            return
        for agent in live.agents:
            await agent.wait()
        record = self.ledger.records[live.name]
        record.agents = []
        self.ledger.save(record)
        self.slots.step(live.name, _slots.Exited(live.turn))


class _Failed(Exception):
    pass


@attrs.frozen
class _Launch:
    """What a turn is asked to do."""

    live: Live
    prompt: str
    caller: Caller
    spec: RuntimeSpec
    fresh: SessionRecord | None
    """A new session's record (``start``); None to go on with the name's session (``continue``)."""
    previous: Live | None
    """The name's earlier turn, whose task may still be ending."""


@attrs.define(eq=False)
class _Run:
    """How far a turn got."""

    record: SessionRecord | None = None
    sink: TurnSink | None = None
    outcome: TurnOutcome | None = None
    failure: str | None = None
    reason: str = "completed"
