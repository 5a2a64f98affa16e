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

# -- stream-json ---------------------------------------------------------------------------------

from hive.sink import (  # noqa: E402
    ApiMessage,
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemInit,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(
    st.sampled_from(["type", "subtype", "session_id", "message", "result", "is_error", "x", "usage"])
    | st.text(max_size=8),
    json_values,
    max_size=6,
)
_extra_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10).filter(
    lambda k: (
        k
        not in {"type", "subtype", "text", "extra", "content", "message", "event", "usage", "error", "result"}
    )
)
extras = st.dictionaries(_extra_keys.map(lambda k: "x_" + k), json_scalars, max_size=2)
blocks = st.one_of(
    st.builds(TextBlock, text=st.text(max_size=30), extra=extras),
    st.builds(ThinkingBlock, thinking=st.text(max_size=30), signature=st.text(max_size=10)),
    st.builds(
        ToolUseBlock,
        id=st.text(max_size=10),
        name=st.text(max_size=10),
        input=st.dictionaries(st.text(max_size=5), json_scalars, max_size=3),
    ),
    st.builds(
        ToolResultBlock,
        tool_use_id=st.text(max_size=10),
        content=st.none() | st.text(max_size=20),
        is_error=st.none() | st.booleans(),
    ),
)
usages = st.builds(
    Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**5), extra=extras
)
stream_messages = st.one_of(
    st.builds(
        SystemInit,
        session_id=st.text(max_size=12),
        model=st.text(max_size=12),
        tools=st.lists(st.text(max_size=8), max_size=3),
        extra=extras,
    ),
    st.builds(
        SystemMessage,
        subtype=st.sampled_from(["status", "compact_boundary", "api_retry"]),
        session_id=st.none() | st.text(max_size=12),
        extra=extras,
    ),
    st.builds(
        AssistantMessage,
        message=st.builds(ApiMessage, content=st.lists(blocks, max_size=3), usage=st.none() | usages),
        session_id=st.none() | st.text(max_size=12),
        extra=extras,
    ),
    st.builds(
        UserMessage,
        message=st.builds(UserContent, content=st.text(max_size=20) | st.lists(blocks, max_size=2)),
        extra=extras,
    ),
    st.builds(
        ResultMessage,
        subtype=st.sampled_from(["success", "error_during_execution"]),
        is_error=st.booleans(),
        result=st.none() | st.text(max_size=20),
        errors=st.none() | st.lists(st.text(max_size=10), max_size=2),
        extra=extras,
    ),
    st.builds(
        StreamEvent, event=st.dictionaries(st.text(max_size=5), json_scalars, max_size=3), extra=extras
    ),
    st.builds(
        UnknownMessage,
        type=st.text(min_size=1, max_size=10).filter(
            lambda t: t not in {"system", "assistant", "user", "result", "stream_event"}
        ),
        data=st.just({}),
    ).map(lambda m: UnknownMessage(m.type, {"type": m.type})),
)
