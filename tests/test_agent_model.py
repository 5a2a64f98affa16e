"""The harness's queue and turn loop as a pure model (hive.agent._model), driven by Hypothesis.

Arrivals (with repeated end ids), writes and failed writes, turns that end carrying their
items or not, compaction requests and crashes come in any order. Whatever the order: every
acknowledged item is carried exactly once by a turn that ended, unless a crash came between
that turn's end and the record of it, where at least once; turns carry everything queued,
oldest first, and nothing that arrived after they started; a compaction asked for runs
before the next turn, a crash included, naming everyone who asked for it.
"""

from __future__ import annotations

from collections import Counter

import attrs
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from hive.agent._model import (
    Admitted,
    Arrived,
    CompactAsked,
    CompactEnded,
    Duplicate,
    ItemKind,
    LoopState,
    Phase,
    Recorded,
    Restarted,
    RetryDue,
    SeenInline,
    StartCompact,
    StartTurn,
    TurnEnded,
    WriteFailed,
    Written,
    admit,
    advance,
    next_step,
)
from tests.helpers.strategies import end_ids


class LoopMachine(RuleBasedStateMachine):
    @initialize(budget=st.sampled_from([1, 10, 40, 10_000]))
    def start(self, budget: int) -> None:
        self.budget = budget
        self.state = LoopState()
        self.acked: dict[int, str | None] = {}  # seq -> end id
        self.carries: Counter[int] = Counter()  # by turns that ended
        self.crash_window: Counter[int] = Counter()
        self.first_carried: list[int] = []
        self.turn: tuple[int, ...] = ()
        self.turn_started_at_seq = 0
        self.compact_due = False  # a compaction asked for while a turn or compaction ran
        self.askers: tuple[str, ...] = ()  # who asked for the compaction owed, in order
        self.shown: set[int] = set()  # wakes shown inline in the running turn (seqs)
        self.settled: set[int] = set()  # shown in a turn that delivered: told, never carried

    # -- arrivals and the queue's writes ----------------------------------------------------------

    @rule(kind=st.sampled_from(ItemKind), body=st.text(max_size=12), end_id=end_ids)
    def arrive(self, kind: ItemKind, body: str, end_id: str | None) -> None:
        before = self.state
        self.state, admission = admit(before, Arrived(kind, "bash-task-x", body, end_id))
        match admission:
            case Admitted(item):
                assert item.seq == before.next_seq
                assert end_id is None or end_id not in before.seen
            case Duplicate(original):
                assert end_id is not None
                if original is not None:
                    assert any(i.seq == original and i.end_id == end_id for i in before.pending)
                else:
                    known = before.seen + tuple(i.end_id for i in before.queued)
                    assert end_id in known
                assert self.state == before

    @precondition(lambda self: self.state.phase is Phase.TURN)
    @rule(end_id=end_ids)
    def arrive_shown(self, end_id: str | None) -> None:
        """A wake whose end was answered inline to the agent during the running turn."""
        before = self.state
        self.state, admission = admit(
            before, Arrived(ItemKind.WAKE, "bash-task-x", "b", end_id, shown_at=1.0)
        )
        if isinstance(admission, Admitted):
            assert admission.item.shown
            self.shown.add(admission.item.seq)
        else:
            assert self.state == before

    @precondition(lambda self: self.state.phase is not Phase.TURN)
    @rule()
    def arrive_shown_with_no_turn_running(self) -> None:
        self.state, admission = admit(self.state, Arrived(ItemKind.WAKE, "bash-task-x", "b", shown_at=1.0))
        assert isinstance(admission, Admitted) and not admission.item.shown

    @precondition(lambda self: self.state.pending)
    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        # The queue writes in the order of admission: some first pending items at once.
        count = data.draw(st.integers(min_value=1, max_value=len(self.state.pending)))
        batch = self.state.pending[:count]
        self.state = advance(self.state, Written(tuple(i.seq for i in batch)))
        for item in batch:
            self.acked[item.seq] = item.end_id

    @precondition(lambda self: self.state.pending)
    @rule()
    def fail_write(self) -> None:
        seq = self.state.pending[0].seq
        self.state = advance(self.state, WriteFailed((seq,)))
        assert all(i.seq != seq for i in (*self.state.pending, *self.state.queued))

    # -- the loop -------------------------------------------------------------------------------

    @rule()
    def step(self) -> None:
        before = self.state
        self.state, step = next_step(before, self.budget)
        if before.phase is not Phase.IDLE:
            assert step is None
            return
        if before.compact:
            assert step == StartCompact(self.askers)
            self.compact_due = False
            return
        assert not self.compact_due, "a compaction asked for during a turn did not run before the next"
        if not before.queued:
            assert step is None
            return
        assert isinstance(step, StartTurn)
        seqs = tuple(i.seq for i in step.items)
        # The oldest queued items, in order, as many as the budget holds (at least one).
        assert seqs == tuple(i.seq for i in before.queued[: len(seqs)])
        assert seqs == tuple(sorted(seqs))
        assert not any(i.shown for i in before.queued), "a wake shown in a turn that ended is still held"
        size = sum(i.size for i in step.items)
        assert len(seqs) == 1 or size <= self.budget
        rest = before.queued[len(seqs) :]
        if rest:
            assert size + rest[0].size > self.budget
        assert all(seq in self.acked for seq in seqs), "a turn carried an unacknowledged item"
        self.turn = seqs
        self.turn_started_at_seq = before.next_seq

    @precondition(lambda self: self.state.phase is Phase.TURN)
    @rule(carried=st.booleans())
    def end_turn(self, carried: bool) -> None:
        self.state = advance(self.state, TurnEnded(carried))
        assert all(seq < self.turn_started_at_seq for seq in self.turn), "a turn carried a later arrival"
        if carried:
            for seq in self.turn:
                if self.carries[seq] == 0:
                    self.first_carried.append(seq)
                self.carries[seq] += 1
            assert self.state.phase is Phase.RECORDING
        else:
            assert self.state.phase is Phase.BACKOFF
            assert {i.seq for i in self.state.queued} >= set(self.turn), "a turn that failed lost items"
            assert not self.state.shown(), "what a turn that did not deliver showed is not a wake again"
            self.shown.clear()

    @precondition(lambda self: self.state.phase is Phase.RECORDING)
    @rule()
    def record(self) -> None:
        self.state = advance(self.state, Recorded())
        assert not {i.seq for i in self.state.queued} & set(self.turn)
        assert not {i.seq for i in (*self.state.queued, *self.state.pending)} & self.shown
        assert self.state.phase is Phase.IDLE
        self.settled |= self.shown
        self.shown.clear()

    @rule()
    def retry(self) -> None:
        before = self.state
        self.state = advance(before, RetryDue())
        if before.phase is Phase.BACKOFF:
            assert self.state.phase is Phase.IDLE

    @rule(by=st.sampled_from(["operator", "agent"]))
    def ask_compact(self, by: str) -> None:
        before = self.state
        self.state = advance(before, CompactAsked(by))
        if before.phase is Phase.COMPACTING:
            assert self.state == before  # the compaction running serves it
        else:
            if by not in self.askers:
                self.askers = (*self.askers, by)
            assert self.state.compact == self.askers
            if before.phase is not Phase.IDLE:
                self.compact_due = True

    @rule()
    def end_compact(self) -> None:
        before = self.state
        self.state = advance(before, CompactEnded())
        if before.phase is Phase.COMPACTING:
            self.askers = ()

    @rule()
    def crash(self) -> None:
        before = self.state
        if before.phase is Phase.RECORDING:
            for seq in before.carrying:
                self.crash_window[seq] += 1
        self.state = advance(before, Restarted())
        assert self.state.phase is Phase.IDLE
        assert [i.seq for i in self.state.queued] == [i.seq for i in before.queued], "a crash lost an item"
        assert not self.state.shown(), "a turn a crash cut short delivered nothing it showed"
        self.shown.clear()
        assert not self.state.pending
        # A compaction asked for (and written) that has not ended is owed still.
        assert self.state.compact == self.askers
        self.compact_due = bool(self.askers)

    # -- what always holds ---------------------------------------------------------------------

    @invariant()
    def carried_once_unless_a_crash_came_between_end_and_record(self) -> None:
        for seq, count in self.carries.items():
            assert seq in self.acked
            assert count <= 1 + self.crash_window[seq], (seq, count, self.crash_window[seq])
            assert seq not in self.settled, f"{seq} was shown in a turn that delivered, and carried"

    @invariant()
    def first_carried_in_arrival_order(self) -> None:
        assert self.first_carried == sorted(self.first_carried)

    @invariant()
    def acknowledged_ends_are_unique(self) -> None:
        ends = [e for e in self.acked.values() if e is not None]
        assert len(ends) == len(set(ends))

    @invariant()
    def an_acknowledged_item_is_queued_until_carried(self) -> None:
        queued = {i.seq for i in self.state.queued}
        for seq in self.acked:
            assert seq in queued or self.carries[seq] >= 1 or seq in self.settled

    @invariant()
    def only_the_running_turn_holds_shown_wakes(self) -> None:
        if self.state.phase not in (Phase.TURN, Phase.RECORDING):
            assert not self.state.shown()

    def teardown(self) -> None:
        if not hasattr(self, "state"):
            return
        # Drain: every write succeeds, every turn ends carrying its items, until nothing is left.
        for _ in range(10_000):
            s = self.state
            if s.pending:
                self.write_all()
            elif s.phase is Phase.TURN:
                self.end_turn(carried=True)
            elif s.phase is Phase.RECORDING:
                self.record()
            elif s.phase is Phase.COMPACTING:
                self.end_compact()
            elif s.phase is Phase.BACKOFF:
                self.retry()
            elif s.queued or s.compact:
                self.step()
            else:
                break
        assert not self.state.queued
        for seq in self.acked:
            assert self.carries[seq] >= 1 or seq in self.settled, f"acknowledged item {seq} was never carried"
        self.carried_once_unless_a_crash_came_between_end_and_record()

    def write_all(self) -> None:
        batch = self.state.pending
        self.state = advance(self.state, Written(tuple(i.seq for i in batch)))
        for item in batch:
            self.acked[item.seq] = item.end_id


TestLoopMachine = LoopMachine.TestCase


def arrived(body: str = "b", end_id: str | None = None) -> Arrived:
    return Arrived(ItemKind.WAKE, "bash-task-a", body, end_id)


def queued(*bodies: str) -> LoopState:
    state = LoopState()
    for body in bodies:
        state, _ = admit(state, arrived(body))
    return advance(state, Written(tuple(i.seq for i in state.pending)))


def test_a_turn_carries_everything_queued_and_what_comes_during_it_waits() -> None:
    state, step = next_step(queued("one", "two"), 10_000)
    assert isinstance(step, StartTurn)
    assert [i.body for i in step.items] == ["one", "two"]
    state, _ = admit(state, arrived("three"))
    state = advance(state, Written((3,)))
    assert next_step(state, 10_000)[1] is None
    assert state.waiting() == 1
    state = advance(advance(state, TurnEnded(carried=True)), Recorded())
    _, step = next_step(state, 10_000)
    assert isinstance(step, StartTurn)
    assert [i.body for i in step.items] == ["three"]


def shown_in_a_turn() -> LoopState:
    """A turn runs carrying "one"; the end "t:1" was answered inline to the agent in it."""
    state, _ = next_step(queued("one"), 10_000)
    state, _ = admit(state, attrs.evolve(arrived("shown", end_id="t:1"), shown_at=5.0))
    state = advance(state, Written((2,)))
    assert state.waiting() == 0 and [i.seq for i in state.shown()] == [2]
    return state


def test_a_wake_shown_in_a_turn_that_delivered_leaves_with_what_it_carried() -> None:
    state = advance(advance(shown_in_a_turn(), TurnEnded(carried=True)), Recorded())
    assert state.queued == () and state.seen == ("t:1",)
    assert next_step(state, 10_000)[1] is None
    assert admit(state, arrived(end_id="t:1"))[1] == Duplicate(None)


def test_a_wake_shown_in_a_turn_that_did_not_deliver_or_was_cut_short_is_carried_next() -> None:
    for ended in (
        advance(shown_in_a_turn(), TurnEnded(carried=False)),
        advance(shown_in_a_turn(), Restarted()),
    ):
        _, step = next_step(advance(ended, RetryDue()), 10_000)
        assert isinstance(step, StartTurn)
        assert [(i.body, i.shown) for i in step.items] == [("one", False), ("shown", False)]


def test_a_shown_wake_with_no_turn_running_is_an_ordinary_one_and_one_already_told_is_remembered() -> None:
    state, admission = admit(LoopState(), attrs.evolve(arrived(end_id="t:1"), shown_at=5.0))
    assert isinstance(admission, Admitted) and not admission.item.shown
    state = advance(LoopState(), SeenInline("t:2"))
    assert admit(state, arrived(end_id="t:2"))[1] == Duplicate(None)


def test_an_operator_compact_during_a_turn_runs_before_the_next_turn() -> None:
    state, _ = next_step(queued("one"), 10_000)
    state, _ = admit(state, arrived("two"))
    state = advance(advance(state, Written((2,))), CompactAsked("operator"))
    state = advance(advance(state, TurnEnded(carried=True)), Recorded())
    state, step = next_step(state, 10_000)
    assert step == StartCompact(("operator",))
    assert next_step(state, 10_000)[1] is None  # the turn waits for the compaction's end
    state, step = next_step(advance(state, CompactEnded()), 10_000)
    assert isinstance(step, StartTurn)


def test_a_repeat_of_an_end_is_dropped_while_queued_and_after_it_was_carried() -> None:
    state, first = admit(LoopState(), arrived(end_id="t:1"))
    assert isinstance(first, Admitted)
    assert admit(state, arrived(end_id="t:1"))[1] == Duplicate(first.item.seq)  # still being written
    state = advance(state, Written((first.item.seq,)))
    assert admit(state, arrived(end_id="t:1"))[1] == Duplicate(None)
    state, _ = next_step(state, 10_000)
    state = advance(advance(state, TurnEnded(carried=True)), Recorded())
    assert not state.queued
    assert admit(state, arrived(end_id="t:1"))[1] == Duplicate(None)
    assert isinstance(admit(state, arrived(end_id="t:2"))[1], Admitted)


def test_a_crash_after_the_turn_ended_but_before_the_record_carries_again() -> None:
    state, _ = next_step(queued("one"), 10_000)
    state = advance(state, TurnEnded(carried=True))
    state = advance(state, Restarted())
    _, step = next_step(state, 10_000)
    assert isinstance(step, StartTurn)
    assert [i.body for i in step.items] == ["one"]


@given(st.lists(st.text(max_size=30), min_size=1, max_size=20), st.integers(min_value=1, max_value=100))
def test_the_budget_splits_a_queue_into_turns_in_order(bodies: list[str], budget: int) -> None:
    state = queued(*bodies)
    turns: list[list[str]] = []
    while state.queued:
        state, step = next_step(state, budget)
        assert isinstance(step, StartTurn)
        turns.append([i.body for i in step.items])
        state = advance(advance(state, TurnEnded(carried=True)), Recorded())
    assert [body for turn in turns for body in turn] == bodies
