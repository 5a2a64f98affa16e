"""The task state machine: a final state is never left, and each end has its reason."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hive.bash._model import (
    Event,
    Exited,
    Phase,
    Spawned,
    StopBegun,
    StopReason,
    TaskState,
    Vanished,
    Withdrawn,
    advance,
)
from tests.helpers.strategies import events, stop_reasons


class TaskMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.phase = Phase(TaskState.PENDING)
        self.history: list[Phase] = [self.phase]

    @rule(event=events)
    def apply(self, event: Event) -> None:
        before = self.phase
        self.phase = advance(before, event)
        self.history.append(self.phase)
        if before.state.final:
            assert self.phase == before, "a final state was left"
        if before.stop_reason is not None and not self.phase.state.final:
            assert self.phase.stop_reason == before.stop_reason, "a stop reason changed"

    @invariant()
    def final_states_stick(self) -> None:
        finals = [p for p in self.history if p.state.final]
        if finals:
            assert all(p == finals[0] for p in finals)

    @invariant()
    def never_back_to_pending(self) -> None:
        seen_running = False
        for p in self.history:
            seen_running |= p.state is not TaskState.PENDING
            if seen_running:
                assert p.state is not TaskState.PENDING


TestTaskMachine = TaskMachine.TestCase


def test_the_normal_life_of_a_task() -> None:
    phase = advance(Phase(TaskState.PENDING), Spawned())
    assert phase == Phase(TaskState.RUNNING)
    assert advance(phase, Exited()) == Phase(TaskState.DONE)


@given(stop_reasons)
def test_an_exit_after_a_stop_ends_in_the_state_its_reason_names(reason: StopReason) -> None:
    running = advance(Phase(TaskState.PENDING), Spawned())
    stopping = advance(running, StopBegun(reason))
    assert stopping == Phase(TaskState.RUNNING, reason)
    expected = TaskState.TIMED_OUT if reason is StopReason.TIMEOUT else TaskState.STOPPED
    assert advance(stopping, Exited()).state is expected


@given(stop_reasons, stop_reasons)
def test_the_first_stop_reason_wins(first: StopReason, second: StopReason) -> None:
    running = Phase(TaskState.RUNNING)
    assert advance(advance(running, StopBegun(first)), StopBegun(second)).stop_reason is first


@given(st.sampled_from([TaskState.PENDING, TaskState.RUNNING]))
def test_a_vanished_process_is_interrupted(state: TaskState) -> None:
    assert advance(Phase(state), Vanished()).state is TaskState.INTERRUPTED


def test_a_task_withdrawn_from_the_line_is_stopped_on_request() -> None:
    assert advance(Phase(TaskState.PENDING), Withdrawn()) == Phase(TaskState.STOPPED, StopReason.REQUESTED)


def test_events_that_do_not_apply_change_nothing() -> None:
    pending = Phase(TaskState.PENDING)
    assert advance(pending, Exited()) == pending
    assert advance(Phase(TaskState.RUNNING), Withdrawn()) == Phase(TaskState.RUNNING)
    assert advance(pending, StopBegun(StopReason.REQUESTED)) == pending
    running = Phase(TaskState.RUNNING)
    assert advance(running, Spawned()) == running
