"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

from hypothesis import strategies as st

from hive.bash._model import Event, Exited, Spawned, StopBegun, StopReason, TaskState, Vanished
from hive.bash._records import LooseEnd, OwedWake, TaskRecord

stop_reasons = st.sampled_from(StopReason)
events: st.SearchStrategy[Event] = st.one_of(
    st.just(Spawned()), st.builds(StopBegun, stop_reasons), st.just(Exited()), st.just(Vanished())
)
task_ids = st.from_regex(r"[A-Za-z0-9._-]{1,64}", fullmatch=True)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False)
small_ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)

records = st.builds(
    TaskRecord,
    id=task_ids,
    serial=st.text(alphabet="0123456789abcdef", min_size=16, max_size=16),
    cmd=st.text(),
    cwd=st.text(min_size=1),
    created_at=times,
    state=st.sampled_from(TaskState),
    named=st.booleans(),
    timeout_secs=st.none() | st.floats(min_value=0.001, max_value=1e6),
    started_at=st.none() | times,
    ended_at=st.none() | times,
    exit_code=st.none() | small_ints,
    pid=st.none() | st.integers(min_value=1, max_value=2**22),
    pid_start_time=st.none() | st.integers(min_value=0, max_value=2**62),
    stop_reason=st.none() | stop_reasons,
    stop_started_at=st.none() | times,
    signals=st.lists(st.sampled_from(["SIGINT", "SIGKILL"]), max_size=2).map(tuple),
    notes=st.lists(st.text(), max_size=3).map(tuple),
)
loose_ends = st.builds(
    LooseEnd,
    task_id=task_ids,
    serial=st.text(min_size=1),
    cmd=st.text(),
    since=times,
    wake=st.none() | st.builds(OwedWake, sender=st.text(), body=st.text()),
)
