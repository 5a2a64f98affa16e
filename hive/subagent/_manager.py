"""The subagent sessions of one daemon: their turns, the slot each name holds, and their ends.

Each turn runs in a task of the manager's nursery, inside a cancel scope that is its slot's
handle: ``interrupt`` cancels it, and the runtime's stop path (the same one every early end
of a turn takes) sends the agent SIGINT, or ``session/cancel`` on ACP. The slot transitions
themselves are ``_slots.step``, a pure function; this module only applies them.

A turn opens its runtime, runs one prompt, and closes it (on ACP, closing drops the
connection: SIGINT to the agent's process group). Its stream goes to the session's turn log;
its end goes to the record, and to the caller: in the answer of a ``status`` call that was
waiting for it, else as a wake from ``subagent-<name>`` to the caller's agent socket.

A claude turn's slot is held until its claude has exited (an interrupted claude is
``stopping`` until then, and a restarted daemon waits for one the last daemon left running),
so no second claude ever runs on a session while the first is still exiting.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import attrs
import trio

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
from hive.sink import JsonlSink
from hive.subagent import _slots
from hive.subagent._agents import Host, SystemHost, TurnAgent
from hive.subagent._courier import Courier, wake_courier
from hive.subagent._errors import BadArgument, NameBusy, NameStopping, UnknownSubagent
from hive.subagent._records import AgentPid, Current, SessionRecord, TurnEnd
from hive.subagent._slots import Arm, Phase, Refusal, Slot
from hive.subagent._store import NAME, Store
from hive.subagent._turns import TurnSink, end_of
from hive.subagent._wire import Caller
from hive.wake import Wake

log = logging.getLogger(__name__)

Opener = Callable[[RuntimeSpec, Config, "str | None"], AbstractAsyncContextManager[Runtime]]
CourierFactory = Callable[[Callable[[str], None]], Courier]
WAKE_TAIL = 1500
"""How much of a result's text a wake carries (status shows more)."""


def open_subagent_runtime(
    spec: RuntimeSpec, config: Config, session_id: str | None
) -> AbstractAsyncContextManager[Runtime]:
    return open_runtime(spec, config, session_id=session_id)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadArgument(
            f"name must be 1 to 64 letters, digits, '.', '_' or '-', not {name!r:.80}; e.g. 'reviewer' or 'tests-1'"
        )
    return name


@attrs.define(eq=False)
class Live:
    """A turn of a name, from its claim until its task is done."""

    name: str
    turn: str
    arm: Arm
    scope: trio.CancelScope
    """The slot's handle: the cancel scope around the turn's ``Runtime.run``."""
    setup: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Around the turn's setup (waiting for the name's earlier turn, opening the runtime):
    an interrupt before ``run`` cancels this one too."""
    opened: bool = False
    """The runtime is open: from here on only ``scope`` is cancelled (a cancel around the
    whole runtime would cut its stop path short)."""
    started_at: float = attrs.field(factory=time.time)
    number: int = 0
    agents: list[TurnAgent] = attrs.field(factory=list)
    interrupted_at: float | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    """The turn has ended (its end is in the record)."""
    done: trio.Event = attrs.field(factory=trio.Event)
    """The turn's task is done (and, for claude, its agents have exited)."""
    waiters: set[object] = attrs.field(factory=set)
    carriers: set[object] = attrs.field(factory=set)
    """The ``status`` calls that were waiting when the turn ended: their answers carry the end."""


@attrs.frozen
class View:
    """A session as ``status`` shows it."""

    record: SessionRecord
    slot: Phase | None
    live: Live | None
    log: Path

    @property
    def name(self) -> str:
        return self.record.name


@attrs.frozen
class Status:
    views: list[View]
    delivered: Callable[[bool], None] | None
    """Call once the answer has been written (True) or could not be (False); None when the
    answer shows no end not yet told (nothing hangs on it)."""


@attrs.frozen
class Interrupted:
    """What ``interrupt`` did: ``sent`` is what the turn's stop path sends (``SIGINT``, or
    ``session/cancel`` on ACP; ``nothing`` for a turn stopped before its agent started), None
    when the turn was already stopping or none was live."""

    view: View
    sent: str | None
    idle: bool = False
    """No turn of the name was live: nothing was done."""


@attrs.define(eq=False)
class SubagentManager:
    store: Store
    host: Host = attrs.field(factory=SystemHost)
    opener: Opener = open_subagent_runtime
    courier_factory: CourierFactory = wake_courier
    shutdown_grace: float = 25.0
    """How long a stopping daemon waits for its turns' stop paths (cancel grace + stop grace + a margin)."""
    stopping: bool = False
    stop_grace: float = 10.0
    """After SIGINT, how long a turn's stop path reads the agent's own end (``Config.stop_grace``)."""
    slots: dict[str, Slot[trio.CancelScope | None]] = attrs.field(factory=dict)
    records: dict[str, SessionRecord] = attrs.field(factory=dict)
    live: dict[str, Live] = attrs.field(factory=dict)
    courier: Courier = attrs.field(init=False)
    _nursery: trio.Nursery | None = None
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _unsaved: set[str] = attrs.field(factory=set)
    """The names whose record in memory is newer than on disk (a save failed: ENOSPC, EIO)."""

    def __attrs_post_init__(self) -> None:
        self.courier = self.courier_factory(self._acked)

    # -- the records on disk ----------------------------------------------------------------------

    def _save(self, record: SessionRecord) -> bool:
        """Write ``record``; a failure (a full disk, an I/O error) is logged once, the record kept in
        memory and written with the next save that works. Whether it is on disk now."""
        try:
            self.store.save(record)
        except OSError as exc:
            if not self._unsaved:
                log.error(  # noqa: TRY400 - the message says what to do
                    "cannot save subagent records in %s (%s): they are kept in memory and written once "
                    "a save works again; free space there (or fix the disk)",
                    self.store.sessions,
                    exc,
                )
            self._unsaved.add(record.name)
            return False
        was_failing = bool(self._unsaved)
        self._unsaved.discard(record.name)
        for name in sorted(self._unsaved):
            other = self.records.get(name)
            try:
                if other is not None:
                    self.store.save(other)
            except OSError:
                return True
            self._unsaved.discard(name)
        if was_failing:
            log.info("subagent records are saved again in %s", self.store.sessions)
        return True

    # -- the daemon's life -----------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled: pick up the sessions on disk, then run turns as they come.

        Cancelling it stops every live turn the way ``interrupt`` does (each turn's own stop
        path: SIGINT), waits a bounded time for the turns to end, and leaves any agent that
        outlives that to the next start. The turns run shielded from the cancel itself, which
        would otherwise reach into their runtimes and cut those stop paths short.
        """
        self.store.create_dirs()
        turns_scope = trio.CancelScope(shield=True)
        async with trio.open_nursery() as nursery:

            async def hold_turns(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
                with turns_scope:
                    async with trio.open_nursery() as turns:
                        task_status.started(turns)
                        await trio.sleep_forever()

            self._nursery = await nursery.start(hold_turns)
            await nursery.start(self.courier.run)
            for record in self.store.load_all():
                self._recover(record, self._nursery)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(self.shutdown_grace):
                    await self._stop_turns()
                turns_scope.cancel()

    async def _stop_turns(self) -> None:
        self.stopping = True
        lives = list(self.live.values())
        for live in lives:
            if not live.ended.is_set() and live.name in self.slots:
                self.interrupt(live.name)
        for live in lives:
            await live.ended.wait()

    def _recover(self, record: SessionRecord, nursery: trio.Nursery) -> None:
        """A session as the last daemon left it: a turn it died during is ``lost``; an agent it
        left running has had its SIGINT (that daemon's, or the kernel's when that daemon exited:
        see ``hive.runtime._lifetime``), is sent no other, and, on claude, keeps the name until
        it exits; an end not yet told is told now."""
        self.records[record.name] = record
        if record.current is not None:
            current = record.current
            end = end_of(
                current, "lost", failure="the subagent daemon stopped during this turn (killed or crashed)"
            )
            record.agents = [*record.agents, *current.agents]
            record.current, record.last, record.turns = None, end, max(record.turns, current.number)
        adopted: list[TurnAgent] = []
        for pid in record.agents:
            agent = self.host.adopt(pid.pid, pid.start, signalled=True)
            if agent is None:
                continue
            log.info(
                "%s: waiting for the agent (pid %d) an earlier daemon left running", record.name, pid.pid
            )
            pid.signalled = True
            adopted.append(agent)
        record.agents = [pid for pid in record.agents if any(a.pid == pid.pid for a in adopted)]
        self._save(record)
        if adopted:
            turn = record.last.turn if record.last else "adopted"
            arm = Arm(record.backend)
            self._step(record.name, _slots.Adopted(arm, turn, None))
            nursery.start_soon(self._outlive, record, turn, adopted)
        if record.last is not None and not record.last.told:
            self._tell(record)

    async def _outlive(self, record: SessionRecord, turn: str, agents: list[TurnAgent]) -> None:
        """Wait for the agents a turn left running; then its name is free."""
        for agent in agents:
            await agent.wait()
        if self.records.get(record.name) is record:
            record.agents = []
            self._save(record)
        self._step(record.name, _slots.Exited(turn))

    # -- slots -----------------------------------------------------------------------------------

    def _step(
        self, name: str, event: _slots.Event[trio.CancelScope | None]
    ) -> _slots.Decision[trio.CancelScope | None]:
        slot, decision = _slots.step(self.slots.get(name), event)
        if slot is None:
            self.slots.pop(name, None)
        else:
            self.slots[name] = slot
        self._changed.set()
        self._changed = trio.Event()
        return decision

    def _claim(self, name: str, arm: Arm) -> Live:
        live = Live(name, secrets.token_hex(6), arm, trio.CancelScope())
        decision = self._step(name, _slots.Claim(arm, live.turn, live.scope))
        if decision.refused is Refusal.STOPPING:
            raise NameStopping(
                f"subagent {name!r} is stopping: its interrupted turn has not ended yet (its agent got "
                "SIGINT and is still exiting). Wait for it with status(name, wait_seconds), then try again."
            )
        if decision.refused is Refusal.BUSY:
            raise NameBusy(
                f"subagent {name!r} is running a turn: wait for it to end (status with wait_seconds; you "
                "are also woken when it ends), or interrupt it first"
            )
        return live

    # -- the tools -------------------------------------------------------------------------------

    def start(
        self,
        name: str,
        prompt: str,
        caller: Caller,
        *,
        backend: str | None = None,
        model: str | None = None,
        effort: str | None = None,
    ) -> View:
        """Start a new session under ``name`` with a first turn (in the background)."""
        name = check_name(name)
        spec = self._spec(caller, backend)
        live = self._claim(name, Arm(spec.backend.value))
        record = SessionRecord(
            name=name,
            backend=spec.backend.value,
            created_at=time.time(),
            model=model,
            effort=effort,
            agent_socket=caller.agent_socket,
        )
        self._launch(live, prompt, caller, spec, fresh=record)
        return self.view(name)

    def continue_(self, name: str, prompt: str, caller: Caller) -> View:
        """Another turn of the session ``name`` (in the background)."""
        name = check_name(name)
        record = self.records.get(name)
        if record is None:
            raise UnknownSubagent(f"no subagent named {name!r}; start it first (status lists them)")
        spec = self._spec(caller, record.backend)
        live = self._claim(name, Arm(record.backend))
        if caller.agent_socket is not None:
            record.agent_socket = caller.agent_socket
        self._launch(live, prompt, caller, spec, fresh=None)
        return self.view(name)

    def interrupt(self, name: str) -> Interrupted:
        """Stop the running turn of ``name`` at once: its stop path sends SIGINT (ACP:
        session/cancel, then SIGINT if it is not answered); the call does not wait."""
        name = check_name(name)
        if name not in self.records and name not in self.slots:
            raise UnknownSubagent(f"no subagent named {name!r} (status lists them)")
        decision = self._step(name, _slots.Interrupt())
        live = self.live.get(name)
        sent = None
        if decision.cancel is not None:
            assert live is not None
            live.interrupted_at = time.time()
            sent = "session/cancel" if live.arm is Arm.ACP else "SIGINT"
            if not live.agents:
                sent = "nothing"  # the turn had not started its agent yet: it stops before
            record = self.records.get(name)
            if live.arm is Arm.CLAUDE and record is not None and record.current is not None:
                for pid in record.current.agents:
                    pid.signalled = True
                self._save(record)
            decision.cancel.cancel()
            if not live.opened:
                live.setup.cancel()
        return Interrupted(self.view(name), sent, idle=decision.refused is Refusal.IDLE)

    async def status(self, name: str | None = None, wait: float = 0.0) -> Status:
        """Every session (or one), after waiting up to ``wait`` seconds for a running turn (of
        ``name``, or any) to end."""
        if name is not None:
            name = check_name(name)
            if name not in self.records and name not in self.live:
                raise UnknownSubagent(f"no subagent named {name!r} (status without a name lists them)")
        token = object()
        watched = [
            live
            for live in self.live.values()
            if (name is None or live.name == name) and not live.ended.is_set()
        ]
        if wait > 0 and watched:
            for live in watched:
                live.waiters.add(token)
            try:
                with trio.move_on_after(wait):
                    async with trio.open_nursery() as nursery:
                        for live in watched:
                            nursery.start_soon(_wait_then_cancel, live.ended, nursery.cancel_scope)
            finally:
                for live in watched:
                    live.waiters.discard(token)
        names = [name] if name is not None else sorted(self.records.keys() | self.live.keys())
        views = [self.view(n) for n in names]
        carried = [live for live in watched if token in live.carriers]
        shown = [
            (v.record.name, v.record.last.turn) for v in views if v.record.last and not v.record.last.told
        ]

        def delivered(ok: bool) -> None:
            for live in carried:
                live.carriers.discard(token)
            if ok:
                for shown_name, turn in shown:
                    self._mark_told(shown_name, turn)
            for live in carried:
                record = self.records.get(live.name)
                last = record.last if record else None
                if not live.carriers and last is not None and last.turn == live.turn and not last.told:
                    self._tell(record)  # type: ignore[arg-type]

        return Status(views, delivered if carried or shown else None)

    def view(self, name: str) -> View:
        record = self.records.get(name)
        live = self.live.get(name)
        if record is None:
            # Claimed, and its task has not written the record yet.
            assert live is not None
            record = SessionRecord(name=name, backend=live.arm.value, created_at=live.started_at)
        slot = self.slots.get(name)
        return View(record, slot.phase if slot else None, live, self.store.log_path(name))

    async def changed(self) -> None:
        """Wait for the next slot transition (tests and benchmarks watch the slots)."""
        await self._changed.wait()

    # -- turns -----------------------------------------------------------------------------------

    def _spec(self, caller: Caller, backend: str | None) -> RuntimeSpec:
        env = dict(caller.env)
        if backend is not None:
            if backend not in {b.value for b in Backend}:
                raise BadArgument(f"runtime must be 'claude' or 'acp', not {backend!r:.40}")
            env["HIVE_RUNTIME"] = backend
        try:
            return RuntimeSpec.from_env(env)
        except HiveRuntimeError as exc:
            raise BadArgument(f"cannot run a subagent: {exc}") from None

    def _launch(
        self, live: Live, prompt: str, caller: Caller, spec: RuntimeSpec, fresh: SessionRecord | None
    ) -> None:
        assert self._nursery is not None, "the manager is not serving"
        previous = self.live.get(live.name)
        self.live[live.name] = live
        self._nursery.start_soon(self._turn, _Launch(live, prompt, caller, spec, fresh, previous))

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
            record = launch.fresh if launch.fresh is not None else self.records[name]
            self.records[name] = turn.record = record
            live.number = record.turns = record.turns + 1
            record.current = Current(live.turn, live.number, live.started_at)
            if not self._save(record):
                # Its agent's pid could not be kept: no turn runs that a restart could not find.
                raise _Failed(
                    f"cannot save the record of subagent {name!r} in {self.store.sessions} "
                    "(see the daemon's log): free space there (or fix the disk), then continue it"
                )
            try:
                out = JsonlSink.to_path(self.store.log_path(name))
            except OSError as exc:
                raise _Failed(f"cannot open the turn log {self.store.log_path(name)}: {exc}") from None
            turn.sink = TurnSink(out)
            config = self._config(launch.caller, record)
            try:
                with self.host.watching(lambda agent: self._spawned(live, agent)):
                    async with self.opener(launch.spec, config, record.session_id) as runtime:
                        live.opened = True
                        with live.scope:
                            turn.outcome = await runtime.run(launch.prompt, turn.sink)
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
            self._step(live.name, _slots.Spawned(live.turn))
            record = self.records[live.name]
            if record.current is not None and record.current.turn == live.turn:
                record.current.agents.append(AgentPid(agent.pid, self.host.start_time(agent)))
                self._save(record)
        except Exception:
            log.exception("%s: could not note the agent pid %d", live.name, agent.pid)

    def _finish(self, live: Live, turn: _Run, reason: str) -> None:
        """The turn has ended: its end into the record, its slot stepped, its caller told."""
        record, sink, outcome = turn.record, turn.sink, turn.outcome
        alive = [agent for agent in live.agents if agent.returncode is None]
        self._step(live.name, _slots.Finished(live.turn, agent_alive=bool(alive)))
        live.carriers = set(live.waiters)
        if record is None:
            live.ended.set()
            return
        current = record.current or Current(live.turn, live.number, live.started_at)
        end = end_of(current, reason, outcome=outcome, sink=sink, failure=turn.failure)
        session_id = (outcome.session_id if outcome else None) or (sink.session_id if sink else None)
        if session_id is not None:
            record.session_id = session_id
        record.current, record.last = None, end
        record.agents = [AgentPid(a.pid, self.host.start_time(a), signalled=a.signalled) for a in alive]
        self._save(record)
        live.ended.set()
        if not live.carriers:
            self._tell(record)

    async def _await_exits(self, live: Live) -> None:
        """A claude turn's slot is held until its claude has exited."""
        slot = self.slots.get(live.name)
        if slot is None or slot.turn != live.turn or not slot.turn_over:
            return
        for agent in live.agents:
            await agent.wait()
        record = self.records[live.name]
        record.agents = []
        self._save(record)
        self._step(live.name, _slots.Exited(live.turn))

    # -- telling the caller ----------------------------------------------------------------------

    def _tell(self, record: SessionRecord) -> None:
        """Wake the caller with this session's last end (if it has an agent socket)."""
        end = record.last
        if end is None or end.told or record.agent_socket is None:
            return
        self.courier.send(_key(record.name, end.turn), Path(record.agent_socket), wake_for(record, end))

    def _mark_told(self, name: str, turn: str) -> None:
        record = self.records.get(name)
        if record is None or record.last is None or record.last.turn != turn or record.last.told:
            return
        record.last.told = True
        self.courier.withdraw(_key(name, turn))
        self._save(record)

    def _acked(self, key: str) -> None:
        name, _, turn = key.partition(":")
        self._mark_told(name, turn)


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


def _key(name: str, turn: str) -> str:
    return f"{name}:{turn}"


async def _wait_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def wake_for(record: SessionRecord, end: TurnEnd) -> Wake:
    how = end.stop_reason + (", an error" if end.is_error else "")
    text = (end.result or "").strip() or "; ".join(end.errors) or "(no result text)"
    if len(text) > WAKE_TAIL:
        text = "…" + text[-(WAKE_TAIL - 1) :]
    body = (
        f"subagent {record.name} ended turn {end.number} ({how}). Result: {text}\n"
        f"status(name={record.name!r}) shows it whole; continue(name={record.name!r}, prompt) goes on."
    )
    return Wake(sender=f"subagent-{record.name}", body=body, end_id=f"subagent-{record.name}:{end.turn}")


@asynccontextmanager
async def running_manager(store: Store, **options: object) -> AsyncIterator[SubagentManager]:
    """A manager serving for the duration of the block (stopped as the daemon stops it)."""
    manager = SubagentManager(store, **options)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.serve)
        yield manager
        nursery.cancel_scope.cancel()


def environment_of_caller(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a caller passes on to its subagents (CLAUDECODE left out: the subagent
    is not nested inside the caller's Claude Code)."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k != "CLAUDECODE"}
