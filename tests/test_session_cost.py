"""A turn's cost is how much its session's cumulative cost grew (`hive.sink.SessionCost`)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive.agent import TurnRecord
from hive.agent._session import resumed_cost
from hive.sink import Batch, MemorySink, SessionCost, TurnCost
from hive.subagent import Current
from hive.subagent._turns import TurnSink, end_of

CENT = 0.01


def test_a_resumed_session_counts_each_turn_once() -> None:
    base = SessionCost()
    spent = []
    for reported in (0.00022, 0.00044, 0.00066, 0.00088):
        turn, base = base.after("s1", reported)
        spent.append(turn)
    assert spent == [0.00022, 0.00022, 0.00022, 0.00022]
    assert base == SessionCost("s1", 0.00088)


def test_a_new_session_counts_from_zero() -> None:
    assert SessionCost("old", 0.5).after("new", 0.01) == (0.01, SessionCost("new", 0.01))


def test_a_turn_that_reports_no_cost_keeps_the_base() -> None:
    base = SessionCost("s1", 0.3)
    assert base.after("s1", None) == (0.0, base)
    assert base.after("s1", 0.0) == (0.0, base)
    assert base.after(None, 0.4) == (0.0, base)
    assert base.after("s2", None) == (0.0, SessionCost("s2", 0.0))


def test_a_count_that_went_back_is_taken_as_counted_again_from_zero() -> None:
    assert SessionCost("s1", 0.3).after("s1", 0.05) == (0.05, SessionCost("s1", 0.05))


def test_a_turn_sums_its_results() -> None:
    """A turn past the watermark: the turn, its checkpoint and its /compact, all in one session."""
    cost = TurnCost(SessionCost("s1", 1.0))
    for reported in (1.25, 1.5, 1.75):
        cost.result("s1", reported)
    cost.result("s1", "not a number")
    assert (cost.usd, cost.session) == (0.75, SessionCost("s1", 1.75))


# A session's life as hive sees it: turns that each cost something, reported or not (a turn that
# reports nothing is counted by the next report), the session changing (a lost session, an ACP
# compaction's new one), and the harness restarting (the base is what the session file kept: a
# round trip through its fields).
_event = st.one_of(
    st.tuples(st.sampled_from(["turn", "silent turn"]), st.integers(min_value=0, max_value=10_000)),
    st.tuples(st.sampled_from(["new session", "restart"]), st.just(0)),
)


@given(st.lists(_event, max_size=60))
def test_per_turn_costs_are_each_turns_own_and_sum_to_the_sessions_totals(
    events: list[tuple[str, int]],
) -> None:
    base = SessionCost()
    session, cumulative, reported_totals = 0, 0, {0: 0}
    unreported = 0  # cents spent by turns that reported nothing since the last report
    counted = []
    for kind, cents in events:
        if kind == "new session":
            session, cumulative, unreported = session + 1, 0, 0
            reported_totals[session] = 0
        elif kind == "restart":
            base = SessionCost(**attrs.asdict(base))
        else:
            cumulative += cents
            reported = cumulative * CENT if kind == "turn" else None
            spent, base = base.after(f"s{session}", reported)
            if kind == "turn":
                reported_totals[session] = cumulative
                assert spent == pytest.approx((cents + unreported) * CENT, abs=1e-9)
                unreported = 0
            else:
                assert spent == 0.0
                unreported += cents
            counted.append(spent)
    assert sum(counted) == pytest.approx(sum(reported_totals.values()) * CENT, abs=1e-9)


async def test_a_subagents_turn_end_has_its_own_cost_measured_from_its_sessions() -> None:
    """A subagent's resumed session: its turn's results are measured from the session's cost
    that its record kept (here two results in one turn: a turn and its compaction)."""
    sink = TurnSink(MemorySink(), TurnCost(SessionCost("s-1", 0.5)))
    for total in (0.75, 0.875):
        line = {"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1"}
        await sink.write(Batch.of([{**line, "total_cost_usd": total}]))
    end = end_of(Current("t-1", 3, 1.0), "completed", sink=sink)
    assert (end.cost_usd, sink.cost.session) == (0.375, SessionCost("s-1", 0.875))


def _ended(session: str | None, total: float) -> TurnRecord:
    return TurnRecord(turn=1, kind="turn", started=0.0, ended=1.0, session_id=session, session_cost_usd=total)


def test_a_restart_measures_from_the_last_recorded_turn_of_the_session() -> None:
    """A harness that died after saving the session and before recording its turn: the next
    turn is measured from the log's last record, so the unrecorded turn's cost is in it."""
    ahead = SessionCost("s1", 0.75)
    assert resumed_cost(ahead, _ended("s1", 0.5)) == SessionCost("s1", 0.5)
    # Another session's record, a record that reported nothing, or none: the file's.
    assert resumed_cost(ahead, _ended("s0", 0.5)) == ahead
    assert resumed_cost(ahead, _ended("s1", 0.0)) == ahead
    assert resumed_cost(ahead, None) == ahead
    assert resumed_cost(SessionCost(), _ended(None, 0.5)) == SessionCost()
