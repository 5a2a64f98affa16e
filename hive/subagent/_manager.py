"""The subagent sessions of one daemon, as its tools see them: ``start``, ``continue``,
``interrupt`` and ``status``, and the daemon's life around them.

Each job is a piece of its own, which this class wires together and calls:

==================  ===========================================================================
``_ledger``         the records, in memory and on disk (a save that fails is retried)
``_slot_table``     the slot each name holds (``_slots.step``, a pure function, applied)
``_turn_runner``    each turn in a task of the turn nursery: run, stopped, its end written
``_telling``        each end told to its caller, in an answer or by a wake
``_recovery``       the sessions as the last daemon left them, taken over at the start
==================  ===========================================================================

Stopping the daemon (cancelling ``serve``) stops every live turn the way ``interrupt`` does
and puts a deadline on the turns' own scope, as a server gives its connections a grace
period: the turns end by their stop paths (SIGINT), and whatever is still running at the
deadline is cancelled; an agent that outlives that is left to the next start.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import attrs
import trio

from hive._limits import is_name
from hive.runtime import Backend, HiveRuntimeError, RuntimeSpec
from hive.subagent import _slots
from hive.subagent._agents import Host, SystemHost
from hive.subagent._caller import Caller
from hive.subagent._errors import BadArgument, UnknownSubagent
from hive.subagent._ledger import Ledger
from hive.subagent._live import Live
from hive.subagent._recovery import Recovery
from hive.subagent._session_records import SessionRecord
from hive.subagent._slot_table import Handle, SlotTable
from hive.subagent._slots import Arm, Refusal, Slot
from hive.subagent._store import Store
from hive.subagent._telling import Courier, CourierFactory, Teller, wake_courier
from hive.subagent._turn_runner import Opener, TurnRunner, open_subagent_runtime
from hive.subagent._views import Interrupted, Status, View

__all__ = [
    "Interrupted",
    "Live",
    "Status",
    "SubagentManager",
    "View",
    "check_name",
    "environment_of_caller",
    "running_manager",
]


def check_name(name: object) -> str:
    """``name`` if it is a subagent's name, else the ``BadArgument`` that says what one is."""
    if not isinstance(name, str) or not is_name(name):
        raise BadArgument(
            f"name must be 1 to 64 letters, digits, '.', '_' or '-', not {name!r:.80}; e.g. 'reviewer' or 'tests-1'"
        )
    return name


def _store_moved(manager: SubagentManager, _attribute: object, store: Store) -> Store:
    manager.ledger.store = store
    return store


@attrs.define(eq=False)
class SubagentManager:
    """The sessions of one daemon and their turns, behind the four tools (``serve`` runs them)."""

    store: Store = attrs.field(on_setattr=_store_moved)
    """Where the sessions live; the ledger writes its records there."""
    host: Host = attrs.field(factory=SystemHost)
    opener: Opener = open_subagent_runtime
    courier_factory: CourierFactory = wake_courier
    shutdown_grace: float = 25.0
    """How long a stopping daemon waits for its turns' stop paths (cancel grace + stop grace + a margin)."""
    stop_grace: float = 10.0
    """After SIGINT, how long a turn's stop path reads the agent's own end (``Config.stop_grace``)."""
    ledger: Ledger = attrs.field(init=False)
    table: SlotTable = attrs.field(init=False, factory=SlotTable)
    teller: Teller = attrs.field(init=False)
    runner: TurnRunner = attrs.field(init=False)
    recovery: Recovery = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.ledger = Ledger(self.store)
        self.teller = Teller(self.ledger, self.courier_factory)
        self.runner = TurnRunner(
            self.ledger, self.table, self.teller, self.host, self.opener, stop_grace=self.stop_grace
        )
        self.recovery = Recovery(self.ledger, self.table, self.host, self.teller)

    @property
    def records(self) -> dict[str, SessionRecord]:
        """Every session's record, by name."""
        return self.ledger.records

    @property
    def slots(self) -> dict[str, Slot[Handle]]:
        """The slot of each name a turn holds (a free name has none)."""
        return self.table.slots

    @property
    def live(self) -> dict[str, Live]:
        """The turn of each name whose task is not done yet."""
        return self.runner.live

    @property
    def courier(self) -> Courier:
        """What carries the wakes to the callers' agent sockets."""
        return self.teller.courier

    @property
    def stopping(self) -> bool:
        """Whether the daemon is stopping (its turns are being stopped)."""
        return self.runner.stopping

    # -- the daemon's life -----------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled: pick up the sessions on disk, then run turns as they come.

        The turns run in a nursery of their own, in a scope shielded from the cancel of this
        call, which would otherwise reach into their runtimes and cut their stop paths short.
        Cancelling it stops every live turn the way ``interrupt`` does (each turn's own stop
        path: SIGINT) and gives that scope a deadline ``shutdown_grace`` away; the scope is
        cancelled once every turn has ended, or at the deadline.
        """
        self.store.create_dirs()
        turns_scope = trio.CancelScope(shield=True)
        async with trio.open_nursery() as nursery:
            self.runner.nursery = await nursery.start(_hold_nursery, turns_scope)
            self.courier.start(nursery)
            for record in self.store.load_all():
                self.recovery.recover(record, self.runner.nursery)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                turns_scope.deadline = trio.current_time() + self.shutdown_grace
                lives = self._stop_turns()
                with trio.CancelScope(shield=True, deadline=turns_scope.deadline):
                    for live in lives:
                        await live.ended.wait()
                turns_scope.cancel()

    def _stop_turns(self) -> list[Live]:
        """Every live turn takes its stop path (as ``interrupt`` sends it); the turns to wait for."""
        self.runner.stopping = True
        lives = list(self.live.values())
        for live in lives:
            if not live.ended.is_set() and live.name in self.slots:
                self.interrupt(live.name)
        return lives

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
        self.runner.launch(live, prompt, caller, spec, fresh=record)
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
        self.runner.launch(live, prompt, caller, spec, fresh=None)
        return self.view(name)

    def interrupt(self, name: str) -> Interrupted:
        """Stop the running turn of ``name`` at once: its stop path sends SIGINT (ACP:
        session/cancel, then SIGINT if it is not answered); the call does not wait."""
        name = check_name(name)
        if name not in self.records and name not in self.slots:
            raise UnknownSubagent(f"no subagent named {name!r} (status lists them)")
        decision = self.table.step(name, _slots.Interrupt())
        sent = None
        if decision.cancel is not None:
            live = self.live.get(name)
            assert live is not None
            sent = self.runner.stop(live, decision.cancel)
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
        return Status(views, self.teller.after_answer(token, carried, shown))

    def view(self, name: str) -> View:
        """The session ``name`` as ``status`` shows it."""
        record = self.records.get(name)
        live = self.live.get(name)
        if record is None:
            # Claimed, and its task has not written the record yet.
            assert live is not None
            record = SessionRecord(name=name, backend=live.arm.value, created_at=live.started_at)
        return View(record, self.table.phase(name), live, self.store.log_path(name))

    async def changed(self) -> None:
        """Wait for the next slot transition (tests and benchmarks watch the slots)."""
        await self.table.changed()

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

    def _claim(self, name: str, arm: Arm) -> Live:
        live = Live(name, secrets.token_hex(6), arm, trio.CancelScope())
        self.table.claim(name, arm, live.turn, live.scope)
        return live


async def _hold_nursery(scope: trio.CancelScope, *, task_status: trio.TaskStatus[trio.Nursery]) -> None:
    """A nursery inside ``scope``, open until ``scope`` is cancelled."""
    with scope:
        async with trio.open_nursery() as nursery:
            task_status.started(nursery)
            await trio.sleep_forever()


async def _wait_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


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
