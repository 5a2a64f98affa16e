"""The owed-end protocol, as a model (`hive.bash.ends._owed`), driven through random lives of a daemon.

The machine plays the task manager and the ledger around the real model: runs start (reusing a
name, or not), end, are held and answered to clients that are still there or gone, their wakes
are acknowledged, the loose-end writes land late, out of order across runs, or fail (a full
disk), and the daemon crashes at any moment and recovers from what is on disk alone (which is
all a SIGKILLed daemon leaves), sometimes crashing again during its recovery. Checked throughout:

- every end is told by an answer to a client still connected or by an acknowledged wake, or
  stays owed: the model never stops owing an end the agent was not told, a reused name included;
- no end is sent twice by one daemon, and none after it was told;
- whenever the daemon dies, what is on disk owes every end not told (a restart owes each again,
  with its own end id, and owes no end that never was).
"""

from __future__ import annotations

import itertools
from collections import deque

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hive.bash.ends._owed import (
    Abandoned,
    Acked,
    Action,
    Began,
    Content,
    DropLooseEnd,
    Ended,
    Event,
    Found,
    Held,
    Interval,
    Key,
    LooseEndAction,
    OwedEnds,
    PersistLooseEnd,
    Place,
    Recovered,
    Released,
    SendWake,
    SetAside,
    Spawning,
    Stored,
    Unclaimed,
    WithdrawWake,
    plan_recovery,
)

NAMES = ("a", "b")
Path = tuple[str, str | None]
"""A loose end's path: (id, None) for ``bash-task-<id>.json``, (id, serial) for ``...@<serial>.json``."""


@attrs.define
class Run:
    """The truth about one run, whatever the daemon knows."""

    key: Key
    process: str = "running"
    """running, or exited (its wrapper wrote its status, or it never started)."""
    told: bool = False
    """The agent has been told its end (by an answer to a client still there, or an ack)."""


@attrs.define
class Caller:
    """A call holding a run: `run` (its own task, or the previous of its name) or `status`."""

    key: Key


class OwedEndsMachine(RuleBasedStateMachine):
    SHOWN_NEEDS_ACK = False
    """The daemon has an agent socket: an end answered inline is told only by its shown wake's ack."""

    def __init__(self) -> None:
        super().__init__()
        self.serials = (f"s{n}" for n in itertools.count())
        self.runs: dict[Key, Run] = {}
        # The disk: loose ends by path, and each id's current record (serial, final).
        self.loose: dict[Path, tuple[Key, Content]] = {}
        self.records: dict[str, tuple[str, bool]] = {}
        self.new_life()

    def new_life(self) -> None:
        """A daemon that knows nothing yet."""
        self.ends = OwedEnds(shown_needs_ack=self.SHOWN_NEEDS_ACK)
        self.lines: dict[Key, deque[LooseEndAction]] = {}
        self.courier: set[Key] = set()
        self.sent: set[Key] = set()
        self.told_now: set[Key] = set()
        self.known_ended: set[Key] = set()
        self.unsaved_ends: set[Key] = set()
        self.callers: list[Caller] = []
        self.starting: dict[str, tuple[Key, Key | None]] = {}
        """Runs between `begin_run` and `spawn_run`, by name, with the previous run they hold."""
        self.failures = 0

    # -- the manager's side ---------------------------------------------------------------------

    def handle(self, event: Event) -> list[Key]:
        """Hand ``event`` to the model and the actions to their carriers; the keys whose lines
        got loose-end writes."""
        lined: list[Key] = []
        for action in self.ends.handle(event):
            self.dispatch(action, lined)
        return lined

    def dispatch(self, action: Action, lined: list[Key]) -> None:
        match action:
            case SendWake(key, shown):
                if not shown:  # a shown wake goes out as each answer is written, held or not
                    assert key not in self.sent, f"{key} sent twice by one daemon"
                    assert not self.ends.held(key), f"a wake for {key} while a caller waits to answer with it"
                assert self.SHOWN_NEEDS_ACK or not shown, f"a shown wake for {key} with no harness"
                assert key not in self.told_now, f"{key} sent after it was told"
                assert key in self.runs, f"a wake for {key}, which never ran"
                assert key in self.known_ended, f"a wake for {key} before its end"
                self.sent.add(key)
                self.courier.add(key)
            case WithdrawWake(key):
                self.courier.discard(key)
            case PersistLooseEnd() | SetAside() | DropLooseEnd():
                if isinstance(action, DropLooseEnd):
                    assert not self.ends.owes(action.key), f"the loose end of {action.key} dropped while owed"
                self.lines.setdefault(action.key, deque()).append(action)
                lined.append(action.key)

    def await_lines(self, keys: list[Key], data: st.DataObject) -> list[bool]:
        """Carry out what is lined up for ``keys`` now, as a caller that awaits them does;
        whether each landed."""
        landed = []
        for key in keys:
            while self.lines.get(key):
                landed.append(self.carry_out_next(key, fail=data.draw(st.integers(0, 4)) == 0))
        return landed

    def carry_out_next(self, key: Key, *, fail: bool) -> bool:
        """The ledger: the next write in ``key``'s line lands (and is reported), or fails."""
        line = self.lines[key]
        action = line.popleft()
        if not line:
            del self.lines[key]
        task_id, serial = key
        if fail:
            self.failures += 1
            if isinstance(action, SetAside):
                # Cut short after its own path was written: both paths hold it.
                self.loose[task_id, serial] = (key, Content.WAKE)
            return False
        match action:
            case PersistLooseEnd(_, wake, at, _):
                content = Content.WAKE if wake else Content.OPEN
                self.loose[task_id, None if at is Place.LATEST else serial] = (key, content)
                self.handle(Stored(key, content, at))
            case SetAside():
                self.loose[task_id, serial] = (key, Content.WAKE)
                if self.loose.get((task_id, None), (None,))[0] == key:
                    del self.loose[task_id, None]
                self.handle(Stored(key, Content.WAKE, Place.OWN))
            case DropLooseEnd():
                self.loose.pop((task_id, serial), None)
                if self.loose.get((task_id, None), (None,))[0] == key:
                    del self.loose[task_id, None]
                self.handle(Stored(key, Content.NONE, None))
        return True

    def save_final_record(self, key: Key) -> None:
        """The final record, if the model allows it now (else it stays to be saved)."""
        task_id, serial = key
        if not self.ends.may_record_end(key):
            self.unsaved_ends.add(key)
            return
        self.unsaved_ends.discard(key)
        if self.records.get(task_id, ("",))[0] == serial:
            self.records[task_id] = (serial, True)

    def tell(self, key: Key) -> None:
        self.runs[key].told = True
        self.told_now.add(key)

    def current(self, name: str) -> Key | None:
        serial = self.records.get(name, (None,))[0]
        return None if serial is None else (name, serial)

    def settle(self, key: Key, data: st.DataObject) -> None:
        """A run's end as the manager sees it: `_finish`, or a restarted daemon settling it."""
        self.known_ended.add(key)
        self.await_lines(self.handle(Ended(key)), data)
        self.save_final_record(key)

    # -- rules ----------------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), data=st.data())
    def begin_run(self, name: str, data: st.DataObject) -> None:
        """`run` up to its spawn: the new run registered and held, the previous run's end set aside."""
        previous = self.current(name)
        if name in self.starting or (previous is not None and previous not in self.known_ended):
            return  # refused: the name is held by a task starting or running
        key = (name, next(self.serials))
        if previous is None or not self.ends.owes(previous):
            previous = None
        else:
            self.handle(Held(previous))  # the answer reports it too
        if not all(self.await_lines(self.handle(Began(key)), data)):
            self.abandon(key, previous)  # refused: the previous end could not be set aside
            return
        if previous is not None and previous in self.unsaved_ends:
            self.save_final_record(previous)  # its last state, before its files move aside
        self.starting[name] = (key, previous)

    @precondition(lambda self: self.starting)
    @rule(data=st.data())
    def spawn_run(self, data: st.DataObject) -> None:
        """The rest of `run`: its record and loose end saved, its process started (or not)."""
        name = data.draw(st.sampled_from(sorted(self.starting)))
        key, previous = self.starting.pop(name)
        spawn = self.ends.handle(Spawning(key))
        # Its begin set aside what was owed under its name: the latest path is free for it.
        assert spawn, f"{key} may not start although its begin succeeded"
        outcome = data.draw(st.sampled_from(["ok", "ok", "ok", "full", "fork", "crash"]))
        if outcome in ("full", "fork"):
            # Refused: nothing ran. (A fork that failed removed the record and loose end it saved.)
            self.abandon(key, previous)
            return
        (persist,) = spawn
        assert isinstance(persist, PersistLooseEnd)
        assert persist.at is Place.LATEST
        # Its files and record, the previous run's moved aside, then its loose end.
        self.records[name] = (key[1], False)
        if outcome == "crash":
            # Between the record and the loose end: its process never started.
            self.runs[key] = Run(key, process="exited")
            self.crash(data)
            return
        self.runs[key] = Run(key)
        self.loose[name, None] = (key, Content.OPEN)
        self.handle(Stored(key, Content.OPEN, Place.LATEST))
        self.callers.append(Caller(key))
        if previous is not None:
            self.callers.append(Caller(previous))

    def abandon(self, key: Key, previous: Key | None) -> None:
        self.handle(Abandoned(key))
        if previous is not None:
            self.handle(Released(previous, told=False))

    @precondition(lambda self: any(r.process == "running" for r in self.runs.values()))
    @rule(data=st.data())
    def exit(self, data: st.DataObject) -> None:
        running = sorted(key for key, r in self.runs.items() if r.process == "running")
        key = data.draw(st.sampled_from(running))
        self.runs[key].process = "exited"
        self.settle(key, data)

    @precondition(lambda self: self.callers)
    @rule(data=st.data(), connected=st.booleans())
    def answer(self, data: st.DataObject, connected: bool) -> None:
        caller = self.callers.pop(data.draw(st.integers(0, len(self.callers) - 1)))
        key = caller.key
        # An answer carries the end only if the manager knew it had ended.
        told = connected and key in self.known_ended
        if told and not self.SHOWN_NEEDS_ACK:
            self.tell(key)
        self.handle(Released(key, told=told))

    @rule(name=st.sampled_from(NAMES))
    def status(self, name: str) -> None:
        key = self.current(name)
        if key is not None:
            self.handle(Held(key))
            self.callers.append(Caller(key))

    @precondition(lambda self: self.courier)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.courier)))
        self.courier.discard(key)
        if not self.runs[key].told:
            self.tell(key)
        self.await_lines(self.handle(Acked(key)), data)

    @precondition(lambda self: self.lines)
    @rule(data=st.data(), fail=st.integers(0, 4))
    def land(self, data: st.DataObject, fail: int) -> None:
        """A write lined up earlier lands now (a later one of another run may have landed first)."""
        key = data.draw(st.sampled_from(sorted(self.lines)))
        self.carry_out_next(key, fail=fail == 0)

    @rule(data=st.data())
    def interval(self, data: st.DataObject) -> None:
        self.await_lines(self.handle(Interval()), data)
        for key in sorted(self.unsaved_ends):
            self.save_final_record(key)

    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        """SIGKILL: what is lined up never lands; processes go on, and some end meanwhile."""
        self.check_disk_owes_every_end()
        for run in self.runs.values():
            if run.process == "running" and data.draw(st.booleans()):
                run.process = "exited"
        while True:
            owed = self.owed_on_disk()
            self.new_life()
            # Up to this many steps of recovery, then (if drawn) another crash.
            steps = data.draw(st.one_of(st.none(), st.integers(0, 6)))
            if self.recover(data, steps):
                break
            self.check_disk_owes_every_end()
        assert set(self.ends.owed()) == owed, "a restart owes what the disk owes, no more, no less"
        for key, run in self.runs.items():
            if not run.told and key in self.known_ended:
                assert key in self.courier, f"{key} is owed but its wake is not sent again"

    def recover(self, data: st.DataObject, steps: int | None) -> bool:
        """What `_recovery.recover` does, from the disk alone; False if it crashed again."""
        found = [
            Found(key, Place.LATEST if serial is None else Place.OWN, content)
            for (_task_id, serial), (key, content) in sorted(self.loose.items(), key=str)
        ]
        plan = plan_recovery(((task_id, serial) for task_id, (serial, _final) in self.records.items()), found)
        work: list[tuple[str, object]] = [("superseded", f) for f in plan.superseded]
        work += [("record", key) for key in sorted(plan.runs)]
        work += [("unclaimed", f) for f in (*plan.orphans.values(), *plan.earlier)]
        for done, (kind, item) in enumerate(work):
            if steps is not None and done == steps:
                return False
            if kind in ("superseded", "unclaimed"):
                # An earlier run's end (or one whose record was lost): it has ended.
                assert isinstance(item, Found)
                self.known_ended.add(item.key)
                event = Unclaimed(item.key, item.at, superseded=kind == "superseded")
                self.await_lines(self.handle(event), data)
            else:
                assert isinstance(item, tuple)
                key: Key = item
                final = self.records[key[0]][1]
                loose_end = plan.runs[key]
                content = Content.NONE if loose_end is None else loose_end.content
                at = None if loose_end is None else loose_end.at
                if final:
                    self.known_ended.add(key)
                self.await_lines(self.handle(Recovered(key, ended=final, content=content, at=at)), data)
                if not final and self.runs[key].process == "exited":
                    self.settle(key, data)
        # Before it answers: the loose ends of the ends it settled get their wake.
        self.await_lines(self.handle(Interval()), data)
        return True

    # -- invariants -----------------------------------------------------------------------------

    def owed_on_disk(self) -> set[Key]:
        """The ends a daemon starting now would owe."""
        found = [
            Found(key, Place.LATEST if serial is None else Place.OWN, content)
            for (_task_id, serial), (key, content) in self.loose.items()
        ]
        records = [(task_id, serial) for task_id, (serial, _final) in self.records.items()]
        finals = {(task_id, serial): final for task_id, (serial, final) in self.records.items()}
        return plan_recovery(records, found).owed(finals)

    def check_disk_owes_every_end(self) -> None:
        """A crash now: what is on disk owes every end the agent was not told, and no other."""
        owed = self.owed_on_disk()
        untold = {key for key, run in self.runs.items() if not run.told}
        assert untold <= owed, f"a restart now would lose {untold - owed}"
        assert owed <= self.runs.keys(), f"a restart now would owe {owed - self.runs.keys()}, which never ran"

    @invariant()
    def disk_owes_every_end(self) -> None:
        self.check_disk_owes_every_end()

    @invariant()
    def every_end_is_told_or_owed(self) -> None:
        for key, run in self.runs.items():
            if not run.told:
                assert self.ends.owes(key), f"{key} is no longer owed, yet was never told"
        for key in self.told_now:
            assert not self.ends.owes(key), f"{key} was told and is still owed"

    @invariant()
    def told_ends_leave_no_loose_end(self) -> None:
        if self.lines or self.failures:
            return
        on_disk = {key for key, _content in self.loose.values()}
        assert not on_disk & self.told_now, f"told, yet still on disk: {on_disk & self.told_now}"


OwedEndsMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50)
TestOwedEnds = OwedEndsMachine.TestCase


class ShownNeedsAckMachine(OwedEndsMachine):
    SHOWN_NEEDS_ACK = True


ShownNeedsAckMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50)
TestShownNeedsAck = ShownNeedsAckMachine.TestCase


# -- the decisions the machine relies on, one by one ----------------------------------------------

A0, A1 = ("a", "s0"), ("a", "s1")


def started(ends: OwedEnds, key: Key) -> None:
    """``key`` began and its process started (its loose end saved with its record)."""
    ends.handle(Began(key))
    assert ends.handle(Spawning(key)) == (PersistLooseEnd(key, wake=False, at=Place.LATEST, durable=False),)
    ends.handle(Stored(key, Content.OPEN, Place.LATEST))


def test_the_wake_waits_for_every_caller_and_an_answer_to_a_connected_client_tells_the_end() -> None:
    ends = OwedEnds()
    started(ends, A0)
    ends.handle(Held(A0))  # a `status` waits on it too
    assert ends.handle(Ended(A0)) == ()
    assert ends.handle(Released(A0, told=False)) == ()  # `run` answered a client gone away
    assert ends.owes(A0)
    assert ends.handle(Released(A0, told=True)) == (WithdrawWake(A0), DropLooseEnd(A0))
    assert not ends.owes(A0)
    assert ends.debt(A0) is None


def test_under_a_harness_an_end_answered_inline_is_owed_until_its_shown_wake_is_acked() -> None:
    ends = OwedEnds(shown_needs_ack=True)
    started(ends, A0)
    assert ends.handle(Ended(A0)) == ()  # `run` waits on it
    assert ends.handle(Released(A0, told=True)) == (SendWake(A0, shown=True),)
    assert ends.owes(A0) and ends.may_record_end(A0)
    assert ends.handle(Released(A0, told=False)) == ()  # the wake is out already
    assert ends.handle(Acked(A0)) == (DropLooseEnd(A0),)
    assert not ends.owes(A0)


def test_an_end_nobody_holds_goes_out_as_a_wake_and_is_told_by_its_ack() -> None:
    ends = OwedEnds()
    started(ends, A0)
    assert ends.handle(Released(A0, told=False)) == ()  # `run` with wait_seconds=0
    assert ends.handle(Ended(A0)) == (SendWake(A0),)
    assert ends.may_record_end(A0)  # the loose end saved as it started owes the end
    assert ends.handle(Acked(A0)) == (DropLooseEnd(A0),)
    assert not ends.owes(A0)


def test_a_reused_name_sets_the_previous_end_aside_before_the_new_run_may_start() -> None:
    ends = OwedEnds()
    started(ends, A0)
    ends.handle(Released(A0, told=False))
    ends.handle(Ended(A0))
    assert ends.handle(Began(A1)) == (SetAside(A0),)
    assert ends.handle(Spawning(A1)) == ()  # the latest path is still the previous end's
    ends.handle(Stored(A0, Content.WAKE, Place.OWN))
    assert ends.handle(Spawning(A1)) == (PersistLooseEnd(A1, wake=False, at=Place.LATEST, durable=False),)
    ends.handle(Stored(A1, Content.OPEN, Place.LATEST))
    assert ends.owes(A0)
    assert ends.owes(A1)
    # The previous end's loose end is written at its own path from now on.
    ends.handle(Stored(A0, Content.NONE, None))
    assert ends.handle(Interval()) == (PersistLooseEnd(A0, wake=True, at=Place.OWN, durable=False),)


def test_a_start_that_fails_leaves_the_previous_end_the_latest_unless_it_was_set_aside() -> None:
    ends = OwedEnds()
    started(ends, A0)
    ends.handle(Released(A0, told=False))
    ends.handle(Ended(A0))
    ends.handle(Began(A1))  # its set-aside fails: the start is refused
    ends.handle(Abandoned(A1))
    debt = ends.debt(A0)
    assert debt is not None
    assert (debt.owed, debt.superseded, debt.at) == (True, False, Place.LATEST)
    assert ends.debt(A1) is None


def test_a_final_record_waits_until_a_loose_end_owes_the_end() -> None:
    ends = OwedEnds()
    # Found by a restarted daemon with its record and no loose end (it died between the two).
    assert ends.handle(Recovered(A0, ended=False)) == (
        PersistLooseEnd(A0, wake=False, at=Place.LATEST, durable=True),
    )
    # That write failed; the task ends: the wake goes, the loose end is asked for again.
    assert ends.handle(Ended(A0)) == (
        SendWake(A0),
        PersistLooseEnd(A0, wake=True, at=Place.LATEST, durable=True),
    )
    assert not ends.may_record_end(A0)
    assert ends.handle(Interval()) == (PersistLooseEnd(A0, wake=True, at=Place.LATEST, durable=False),)
    ends.handle(Stored(A0, Content.WAKE, Place.LATEST))
    assert ends.may_record_end(A0)
    assert ends.handle(Interval()) == ()


def test_a_restart_owes_each_end_its_disk_owes() -> None:
    b0, c0, d0 = ("b", "s0"), ("c", "s0"), ("d", "s9")
    found = [
        Found(A1, Place.LATEST, Content.OPEN),  # the record's own
        Found(A0, Place.OWN, Content.WAKE),  # an earlier run of the name
        Found(("b", "s9"), Place.LATEST, Content.OPEN),  # an earlier run whose set-aside was cut short
        Found(d0, Place.LATEST, Content.WAKE),  # its record is lost
    ]
    plan = plan_recovery([A1, b0, c0], found)
    assert plan.runs == {A1: found[0], b0: None, c0: None}
    assert plan.earlier == (found[1],)
    assert plan.superseded == (found[2],)
    assert plan.orphans == {"d": found[3]}
    # A final record with no loose end of its own was told; one that is not final is owed.
    assert plan.owed({A1: True, b0: True, c0: False}) == {A1, A0, ("b", "s9"), c0, d0}


def test_an_end_at_the_latest_path_of_a_later_run_is_set_aside_before_that_run_writes_there() -> None:
    ends = OwedEnds()
    # A restarted daemon finds A0's loose end at the latest path, and A1's record.
    assert ends.handle(Unclaimed(A0, Place.LATEST, superseded=True)) == (SetAside(A0), SendWake(A0))
    assert ends.handle(Recovered(A1, ended=False)) == ()  # the set-aside has not landed
    # It failed: asked for again, and A1 still waits.
    assert ends.handle(Interval()) == (SetAside(A0),)
    ends.handle(Stored(A0, Content.WAKE, Place.OWN))
    assert ends.handle(Interval()) == (PersistLooseEnd(A1, wake=False, at=Place.LATEST, durable=False),)


def test_an_end_found_only_at_its_own_path_stays_there() -> None:
    ends = OwedEnds()
    # Its record is the latest of its id, but a set-aside moved its loose end before the crash.
    assert ends.handle(Recovered(A0, ended=True, content=Content.OPEN, at=Place.OWN)) == (
        PersistLooseEnd(A0, wake=True, at=Place.OWN, durable=True),
        SendWake(A0),
    )


def test_a_new_run_of_the_name_asks_again_for_a_set_aside_that_failed() -> None:
    ends = OwedEnds()
    ends.handle(Unclaimed(A0, Place.LATEST, superseded=True))  # its set-aside fails
    assert ends.handle(Began(A1)) == (SetAside(A0),)
    assert ends.handle(Spawning(A1)) == ()


def test_an_unclaimed_end_at_both_paths_is_owed_and_sent_once() -> None:
    # A set-aside of A0 was cut short (both paths hold it) after A1's record was saved.
    found = [Found(A0, Place.LATEST, Content.OPEN), Found(A0, Place.OWN, Content.WAKE)]
    plan = plan_recovery([A1], found)
    assert plan.superseded == (found[0],)
    assert plan.earlier == ()
    ends = OwedEnds()
    assert ends.handle(Unclaimed(A0, Place.LATEST, superseded=True)) == (SetAside(A0), SendWake(A0))


def test_the_machine_example_of_a_cut_short_set_aside_across_two_crashes() -> None:
    """The example the machine once found: after a reused name's start crashed with the previous
    end's set-aside cut short, the restart sent that end's wake twice. The draws are replayed as
    found; past them, every write lands."""

    class Draws:
        def __init__(self, draws: tuple[object, ...]) -> None:
            self.draws = iter(draws)

        def draw(self, _strategy: object) -> object:
            return next(self.draws, 1)

    def data(*draws: object) -> st.DataObject:
        return Draws(draws)  # type: ignore[return-value]

    state = OwedEndsMachine()
    state.begin_run("a", data())
    state.spawn_run(data("a", "ok"))
    state.crash(data(False, None))
    state.exit(data(A0))
    state.ack(data(A0, 0))  # its loose end's removal fails
    state.begin_run("a", data())
    state.spawn_run(data("a", "crash", None, 0, 0))  # A0's set-aside cut short, twice
    state.ack(data(A0, 0))
    state.ack(data(A1, 0))
    state.crash(data(None))  # raised "sent twice by one daemon" here
    state.check_disk_owes_every_end()
    state.every_end_is_told_or_owed()
    state.teardown()
