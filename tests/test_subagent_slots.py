"""The slot model, by hypothesis: a stateful machine over random sequences of start / continue /
interrupt / turn ends / agent exits / daemon restarts (clean, or a crash), against the pure slot
function (``_slots.step``) and a model of the agents; and, for each example, the async manager run
through the same sequence on virtual time (``MockClock``) with fake runtimes and fake processes,
checked against the model after every step.

Invariants: a name is in at most one slot (and one turn per name runs at a time); no start or
continue is accepted on a stopping name; every interrupt of a live turn is exactly one SIGINT
(on ACP, one session/cancel, and a SIGINT only when the agent does not answer it); no slot
outlives its process's exit.
"""

from __future__ import annotations

import ast
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hive.runtime import Config, RuntimeSpec, StopReason, TurnOutcome
from hive.sink import Batch, Sink
from hive.subagent import (
    Caller,
    NameBusy,
    NameStopping,
    Store,
    SubagentError,
    SubagentManager,
    TurnAgent,
    UnknownSubagent,
    _slots,
)
from hive.subagent._slots import Arm, Phase, Refusal, Slot

NAMES = ("a", "b")
SETTLE = 1000.0  # virtual seconds: longer than every grace, so all that would happen has happened


# -- the pure function, directly ------------------------------------------------------------------


def test_the_slot_module_imports_no_trio() -> None:
    tree = ast.parse(Path(_slots.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] in ("trio", "anyio", "hive")}


def test_the_table() -> None:
    claim = _slots.Claim(Arm.CLAUDE, "t1", "scope")
    slot, decision = _slots.step(None, claim)
    assert slot == Slot(Phase.STARTING, Arm.CLAUDE, "t1", "scope") and decision.accepted
    slot, _ = _slots.step(slot, _slots.Spawned("t1"))
    assert slot is not None and slot.phase is Phase.RUNNING
    assert _slots.step(slot, _slots.Claim(Arm.CLAUDE, "t2", "other"))[1].refused is Refusal.BUSY
    slot, decision = _slots.step(slot, _slots.Interrupt())
    assert slot is not None and slot.phase is Phase.STOPPING and decision.cancel == "scope"
    assert _slots.step(slot, _slots.Claim(Arm.CLAUDE, "t2", "other"))[1].refused is Refusal.STOPPING
    assert _slots.step(slot, _slots.Interrupt()) == (slot, _slots.Decision())  # one SIGINT a turn
    assert _slots.step(slot, _slots.Exited("t1"))[0] is slot  # its turn has not ended yet
    slot, _ = _slots.step(slot, _slots.Finished("t1", agent_alive=True))
    assert slot is not None and slot.turn_over
    assert _slots.step(slot, _slots.Exited("t1"))[0] is None
    acp, _ = _slots.step(None, _slots.Claim(Arm.ACP, "t3", "scope"))
    assert _slots.step(acp, _slots.Interrupt()) == (None, _slots.Decision(cancel="scope"))
    assert _slots.step(None, _slots.Interrupt())[1].refused is Refusal.IDLE
    assert _slots.step(None, _slots.Adopted(Arm.ACP, "t4", None))[0] is None


# -- the model: the pure function, and what the agents do -----------------------------------------


@attrs.define
class ModelAgent:
    pid: int
    name: str
    arm: Arm
    obeys: bool
    """Whether it acts on SIGINT (and, on ACP, answers session/cancel)."""
    alive: bool = True
    signalled: bool = False
    cancels: int = 0
    turn: str = ""
    in_turn: bool = True


@attrs.define
class ModelName:
    slot: Slot[str | None] | None = None
    session: Arm | None = None
    agent: ModelAgent | None = None
    """The agent of the slot's turn (or the one an adopted slot waits for)."""


@attrs.define
class Model:
    """What the manager's world should look like once everything that would happen has happened."""

    names: dict[str, ModelName] = attrs.field(factory=lambda: {n: ModelName() for n in NAMES})
    agents: list[ModelAgent] = attrs.field(factory=list)
    turns: int = 0

    def step(self, name: str, event: _slots.Event[str | None]) -> _slots.Decision[str | None]:
        entry = self.names[name]
        entry.slot, decision = _slots.step(entry.slot, event)
        return decision

    def claim(self, name: str, arm: Arm | None, obeys: bool) -> str:
        """start (with ``arm``) or continue (None): accepted, or why not."""
        entry = self.names[name]
        if arm is None:
            if entry.session is None:
                return "unknown"
            arm = entry.session
        self.turns += 1
        turn = f"t{self.turns}"
        decision = self.step(name, _slots.Claim(arm, turn, turn))  # the turn's id stands for its scope
        if not decision.accepted:
            assert decision.refused is not None
            return decision.refused.value
        entry.session = arm
        agent = ModelAgent(1000 + len(self.agents), name, arm, obeys, turn=turn)
        self.agents.append(agent)
        entry.agent = agent
        self.step(name, _slots.Spawned(turn))
        return "accepted"

    def _sigint(self, agent: ModelAgent) -> None:
        if agent.signalled or not agent.alive:
            return
        agent.signalled = True
        if agent.obeys:
            agent.alive = agent.in_turn = False

    def _end(self, name: str, agent: ModelAgent) -> None:
        """The turn of ``agent`` is over: the runtime closes (ACP: drops the agent, SIGINT)."""
        agent.in_turn = False
        if agent.arm is Arm.ACP:
            self._sigint(agent)
        self.step(name, _slots.Finished(agent.turn, agent_alive=agent.alive))

    def interrupt(self, name: str) -> str:
        entry = self.names[name]
        if entry.slot is None and entry.session is None:
            return "unknown"
        decision = self.step(name, _slots.Interrupt())
        if decision.refused is not None:
            return "idle"
        if decision.cancel is None and entry.slot is not None:
            return "stopping"
        agent = entry.agent
        assert agent is not None
        if agent.arm is Arm.CLAUDE:
            self._sigint(agent)
        else:
            agent.cancels += 1
            if agent.obeys:
                agent.in_turn = False
            else:
                self._sigint(agent)  # the cancel went unanswered: SIGINT after the cancel grace
        self._end(name, agent)
        return "SIGINT" if agent.arm is Arm.CLAUDE else "session/cancel"

    def turn_ends(self, name: str) -> None:
        entry = self.names[name]
        agent = entry.agent
        assert entry.slot is not None and entry.slot.phase is Phase.RUNNING and agent is not None
        if agent.arm is Arm.CLAUDE:
            agent.alive = False
        self._end(name, agent)

    def agent_exits(self, agent: ModelAgent) -> None:
        agent.alive = False
        entry = self.names[agent.name]
        if entry.agent is not agent or entry.slot is None:
            return
        if entry.slot.phase is Phase.RUNNING:
            self._end(agent.name, agent)
        else:
            self.step(agent.name, _slots.Exited(agent.turn))

    def restart(self, crash: bool) -> None:
        """The daemon stops (cleanly: every live turn interrupted; or killed), then starts again."""
        if not crash:
            for name, entry in self.names.items():
                if entry.slot is not None and entry.slot.phase is Phase.RUNNING:
                    self.interrupt(name)
        if crash:
            for dead_daemons in self.agents:
                self._sigint(dead_daemons)  # the kernel's, as their daemon died (parent-death signal)
        for name, entry in self.names.items():
            agent = entry.agent
            entry.slot = None
            if agent is None:
                continue
            if agent.alive:
                self.step(name, _slots.Adopted(agent.arm, agent.turn, None))

    def live_agents(self, name: str) -> list[ModelAgent]:
        return [a for a in self.agents if a.name == name and a.alive]


# -- the fake world the manager runs in -----------------------------------------------------------


_watcher: ContextVar[Callable[[TurnAgent], None] | None] = ContextVar("_watcher", default=None)


@attrs.define(eq=False)
class FakeAgent:
    pid: int
    name: str
    arm: Arm
    obeys: bool
    world: FakeWorld
    signalled: bool = False
    sigints: int = 0
    cancels: int = 0
    turn_done: bool = False
    exited: trio.Event = attrs.field(factory=trio.Event)
    over: trio.Event = attrs.field(factory=trio.Event)
    """Set once its turn is done or it has exited."""

    @property
    def returncode(self) -> int | None:
        return 0 if self.exited.is_set() else None

    def end_turn(self) -> None:
        self.turn_done = True
        self.over.set()

    def exit(self) -> None:
        self.exited.set()
        self.over.set()

    def interrupt(self) -> bool:
        if self.world.dead or self.signalled or self.exited.is_set():
            return False
        self.signalled = True
        self.sigints += 1
        if self.obeys:
            self.end_turn()
            self.exit()
        return True

    def cancel(self) -> None:
        if self.world.dead:
            return
        self.cancels += 1
        if self.obeys:
            self.end_turn()

    async def wait(self) -> int:
        await self.exited.wait()
        return 0


@attrs.define(eq=False)
class Adopted:
    """What a restarted daemon holds of an agent: the record's word on whether it was signalled."""

    agent: FakeAgent
    signalled: bool

    @property
    def pid(self) -> int:
        return self.agent.pid

    @property
    def returncode(self) -> int | None:
        return self.agent.returncode

    def interrupt(self) -> bool:
        if self.signalled:
            return False
        self.signalled = True
        return self.agent.interrupt()

    async def wait(self) -> int:
        return await self.agent.wait()


@attrs.define(eq=False)
class FakeWorld:
    agents: dict[int, FakeAgent] = attrs.field(factory=dict)
    current: dict[str, FakeAgent] = attrs.field(factory=dict)
    open: dict[str, int] = attrs.field(factory=dict)
    dead: bool = False
    """The daemon is dying (a crash): it sends nothing any more."""

    # -- Host --
    @contextlib.contextmanager
    def watching(self, watcher: Callable[[TurnAgent], None]) -> Iterator[None]:
        token = _watcher.set(watcher)
        try:
            yield
        finally:
            _watcher.reset(token)

    def start_time(self, agent: TurnAgent) -> int:
        return 1

    def adopt(self, pid: int, start: int, *, signalled: bool) -> TurnAgent | None:
        agent = self.agents.get(pid)
        return Adopted(agent, signalled) if agent is not None and not agent.exited.is_set() else None

    # -- the runtime --
    def spawn(self, name: str, arm: Arm, obeys: bool) -> FakeAgent:
        agent = FakeAgent(1000 + len(self.agents), name, arm, obeys, self)
        self.agents[agent.pid] = agent
        self.current[name] = agent
        watcher = _watcher.get()
        assert watcher is not None
        watcher(agent)
        return agent

    @asynccontextmanager
    async def opener(
        self, spec: RuntimeSpec, config: Config, session_id: str | None
    ) -> AsyncIterator[FakeRuntime]:
        env = dict(config.env)
        name, arm, obeys = env["SUBAGENT_NAME"], Arm(spec.backend.value), env["OBEYS"] == "1"
        self.open[name] = self.open.get(name, 0) + 1
        assert self.open[name] == 1, f"two runtimes at once for {name}"
        runtime = FakeRuntime(self, name, arm, obeys, config, session_id or str(uuid.uuid4()))
        if arm is Arm.ACP:
            runtime.agent = self.spawn(name, arm, obeys)
        try:
            yield runtime
        finally:
            self.open[name] -= 1
            agent = runtime.agent
            if agent is not None and not agent.exited.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(config.close_grace):
                    if arm is Arm.ACP or not agent.signalled:
                        agent.interrupt()  # ACP: dropping the connection; claude: closing
                    await agent.exited.wait()


@attrs.define(eq=False)
class FakeRuntime:
    world: FakeWorld
    name: str
    arm: Arm
    obeys: bool
    config: Config
    session_id: str
    agent: FakeAgent | None = None

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        if self.agent is None:
            self.agent = self.world.spawn(self.name, self.arm, self.obeys)
        agent = self.agent
        try:
            await agent.over.wait()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):  # the stop path, as the runtimes take it
                if self.arm is Arm.ACP:
                    agent.cancel()
                    with trio.move_on_after(self.config.cancel_grace):
                        await agent.over.wait()
                if not agent.over.is_set():
                    agent.interrupt()
                    with trio.move_on_after(self.config.stop_grace):
                        await agent.over.wait()
                await sink.write(
                    Batch(b'{"type":"result","subtype":"error_during_execution","is_error":true}\n')
                )
            raise
        reason = StopReason.COMPLETED if agent.turn_done else StopReason.EXITED
        await sink.write(Batch(b'{"type":"result","subtype":"success","is_error":false,"result":"ok"}\n'))
        return TurnOutcome(reason, self.session_id, is_error=False, result="ok")

    async def compact(self, sink: Sink) -> None: ...

    async def archive(self) -> None: ...

    def canceller(self) -> Any: ...

    def choices(self) -> Any: ...


@attrs.define(eq=False)
class FakeCourier:
    sent: list[str] = attrs.field(factory=list)

    def send(self, key: str, socket: Path, wake: Any) -> None:
        self.sent.append(key)

    def withdraw(self, key: str) -> None:
        pass

    def start(self, nursery: trio.Nursery) -> None:
        pass


# -- the machine ----------------------------------------------------------------------------------


Step = tuple[str, ...]


class Slots(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.steps: list[tuple[Step, Any, Model]] = []

    def _record(self, step: Step, answer: Any) -> None:
        self.steps.append((step, answer, _snapshot(self.model)))

    @rule(name=st.sampled_from(NAMES), arm=st.sampled_from(Arm), obeys=st.booleans())
    def start(self, name: str, arm: Arm, obeys: bool) -> None:
        before = self.model.names[name].slot
        answer = self.model.claim(name, arm, obeys)
        if before is not None and before.phase is Phase.STOPPING:
            assert answer == "stopping"
        self._record(("start", name, arm.value, str(obeys)), answer)

    @rule(name=st.sampled_from(NAMES), obeys=st.booleans())
    def continue_(self, name: str, obeys: bool) -> None:
        before = self.model.names[name].slot
        answer = self.model.claim(name, None, obeys)
        if before is not None and before.phase is Phase.STOPPING:
            assert answer == "stopping"
        self._record(("continue", name, "", str(obeys)), answer)

    @rule(name=st.sampled_from(NAMES))
    def interrupt(self, name: str) -> None:
        agent = self.model.names[name].agent
        sigints = agent.signalled if agent else None
        # What the slot is right after the call, before the turn's stop path has run:
        at_once, _ = _slots.step(self.model.names[name].slot, _slots.Interrupt())
        answer = self.model.interrupt(name)
        if answer == "SIGINT":
            assert agent is not None and not sigints and agent.signalled  # exactly one
        self._record(("interrupt", name), (answer, at_once.phase if at_once else None))

    @precondition(
        lambda self: any(e.slot and e.slot.phase is Phase.RUNNING for e in self.model.names.values())
    )
    @rule(data=st.data())
    def turn_ends(self, data: st.DataObject) -> None:
        running = [n for n, e in self.model.names.items() if e.slot and e.slot.phase is Phase.RUNNING]
        name = data.draw(st.sampled_from(running))
        self.model.turn_ends(name)
        self._record(("turn_ends", name), None)

    @precondition(lambda self: any(a.alive for a in self.model.agents))
    @rule(data=st.data())
    def agent_exits(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from([a for a in self.model.agents if a.alive]))
        self.model.agent_exits(agent)
        self._record(("agent_exits", str(agent.pid)), None)

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        self.model.restart(crash)
        self._record(("restart", str(crash)), None)

    @invariant()
    def no_slot_outlives_its_agent(self) -> None:
        for name, entry in self.model.names.items():
            if entry.slot is not None and entry.slot.phase is Phase.STOPPING:
                assert entry.agent is not None and entry.agent.alive, name
            if entry.slot is not None:
                assert entry.agent is not None and entry.slot.turn == entry.agent.turn

    @invariant()
    def one_claude_per_session(self) -> None:
        """What the slot protects: no second claude on a session while the first still runs."""
        for name in NAMES:
            claudes = [a for a in self.model.live_agents(name) if a.arm is Arm.CLAUDE]
            assert len(claudes) <= 1, claudes

    @invariant()
    def at_most_one_sigint_each(self) -> None:
        for agent in self.model.agents:
            assert agent.cancels <= 1

    def teardown(self) -> None:
        if self.steps:
            replay(self.steps)


def _snapshot(model: Model) -> Model:
    names = {n: attrs.evolve(e, agent=None) for n, e in model.names.items()}
    agents = [attrs.evolve(a) for a in model.agents]
    return Model(names, agents, model.turns)


# -- the replay: the async manager, step by step, on virtual time ----------------------------------


def replay(steps: list[tuple[Step, Any, Model]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="hive-slots-"))
    try:
        trio.run(_replay, steps, root, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def caller(name: str, obeys: str) -> Caller:
    env = {"SUBAGENT_NAME": name, "OBEYS": "1" if obeys == "True" else "0", "HIVE_ACP_COMMAND": "fake"}
    return Caller(cwd="/", env=env)


async def _replay(steps: list[tuple[Step, Any, Model]], root: Path) -> None:
    world = FakeWorld()
    store = Store(root / "state")
    async with trio.open_nursery() as nursery:
        daemon: list[tuple[SubagentManager, trio.CancelScope, trio.Event]] = []

        async def start_daemon() -> None:
            manager = SubagentManager(
                store, host=world, opener=world.opener, courier_factory=lambda acked: FakeCourier()
            )
            scope, done = trio.CancelScope(), trio.Event()

            async def serve(*, task_status: trio.TaskStatus[None]) -> None:
                with scope:
                    await manager.serve(task_status=task_status)
                done.set()

            await nursery.start(serve)
            daemon[:] = [(manager, scope, done)]

        await start_daemon()
        for index, (step, answer, expected) in enumerate(steps):
            manager = daemon[0][0]
            where = f"step {index} {step}"
            kind, name = step[0], step[1]
            if kind in ("start", "continue"):
                got = _claim(manager, kind, name, step[2], caller(name, step[3]))
                assert got == answer, where
            elif kind == "interrupt":
                got = _interrupt(manager, name)
                # The answer, and the slot at once, before anything else has run:
                phase = manager.slots[name].phase if name in manager.slots else None
                assert (got, phase) == answer, where
            elif kind == "turn_ends":
                agent = world.current[name]
                agent.end_turn()
                if agent.arm is Arm.CLAUDE:
                    agent.exit()
            elif kind == "agent_exits":
                world.agents[int(name)].exit()
            elif kind == "restart":
                crash = name == "True"
                _, scope, done = daemon[0]
                saved = _files(store.sessions) if crash else None
                world.dead = crash
                scope.cancel()
                await done.wait()
                world.dead = False
                if crash:  # the kernel's SIGINT to each agent of the killed daemon
                    for agent in list(world.agents.values()):
                        agent.interrupt()
                if saved is not None:
                    _restore(store.sessions, saved)
                await start_daemon()
            await trio.sleep(SETTLE)
            _check(daemon[0][0], world, expected, where)
        daemon[0][1].cancel()
        await daemon[0][2].wait()
        world.dead = True
        nursery.cancel_scope.cancel()


def _claim(manager: SubagentManager, kind: str, name: str, arm: str, who: Caller) -> str:
    try:
        if kind == "start":
            manager.start(name, "work", who, backend=arm)
        else:
            manager.continue_(name, "more", who)
    except NameStopping:
        return "stopping"
    except NameBusy:
        return "busy"
    except UnknownSubagent:
        return "unknown"
    return "accepted"


def _interrupt(manager: SubagentManager, name: str) -> str:
    try:
        done = manager.interrupt(name)
    except UnknownSubagent:
        return "unknown"
    except SubagentError as exc:
        return type(exc).__name__
    if done.idle:
        return "idle"
    return done.sent or "stopping"


def _check(manager: SubagentManager, world: FakeWorld, expected: Model, where: str) -> None:
    for name in NAMES:
        want = expected.names[name].slot
        got = manager.slots.get(name)
        assert (got.phase if got else None) is (want.phase if want else None), f"{where}: slot of {name}"
        if got is not None and got.phase is Phase.STOPPING:
            # No slot outlives its process's exit.
            assert any(a.name == name and not a.exited.is_set() for a in world.agents.values()), where
    assert len(world.agents) == len(expected.agents), where
    for model_agent in expected.agents:
        agent = world.agents[model_agent.pid]
        assert agent.sigints == int(model_agent.signalled), f"{where}: SIGINTs to {model_agent}"
        assert agent.cancels == model_agent.cancels, f"{where}: session/cancels to {model_agent}"
        assert (not agent.exited.is_set()) == model_agent.alive, f"{where}: {model_agent}"
    assert all(count <= 1 for count in world.open.values()), where


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix == ".json"}


def _restore(directory: Path, files: dict[str, bytes]) -> None:
    for path in directory.iterdir():
        if path.suffix == ".json":
            path.unlink()
    for name, data in files.items():
        (directory / name).write_bytes(data)


Slots.TestCase.settings = settings(max_examples=150, stateful_step_count=25)
test_slots = Slots.TestCase


# -- the daemon's stop: a deadline on the turns' scope ---------------------------------------------


async def test_a_stopping_daemon_ends_once_its_turns_have_ended_well_inside_the_grace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The turns' scope gets a deadline ``shutdown_grace`` away, and is cancelled as soon as every
    turn has ended by its stop path: a claude that ignores SIGINT costs the stop grace and the close
    grace, not the whole shutdown grace; it gets one SIGINT, and its pid stays in the record for the
    next start to wait for."""
    world = FakeWorld()
    store = Store(tmp_path / "state")
    manager = SubagentManager(
        store,
        host=world,
        opener=world.opener,
        courier_factory=lambda acked: FakeCourier(),
        shutdown_grace=25.0,
        stop_grace=10.0,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.serve)
        manager.start("a", "work", caller("a", "False"), backend="claude")
        while "a" not in world.current:
            await manager.changed()
        stopped_at = trio.current_time()
        nursery.cancel_scope.cancel()
    took = trio.current_time() - stopped_at
    assert took == pytest.approx(10.0 + Config.__attrs_attrs__.close_grace.default)
    agent = world.current["a"]
    assert agent.sigints == 1 and not agent.exited.is_set()
    record = manager.records["a"]
    assert record.last is not None and record.last.stop_reason == "daemon_stopped"
    assert [pid.pid for pid in record.agents] == [agent.pid] and record.agents[0].signalled
    assert store.load("a") == record
