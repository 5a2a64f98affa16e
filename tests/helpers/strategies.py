"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

import json

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


# -- JSON as any writer may spell it -------------------------------------------------------------

_SPACES = st.sampled_from(["", " ", "\t", "  ", " \t "])
_MUST_ESCAPE = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


@st.composite
def _spelled_string(draw: st.DrawFn, text: str) -> str:
    """``text`` as a JSON string, the characters a mask picks as ``\\u`` escapes (in either case),
    the others as themselves (or as the short escape JSON requires)."""
    mask = draw(st.integers(0, (1 << len(text)) - 1)) if text else 0
    hex_digits = "{:04X}" if draw(st.booleans()) else "{:04x}"
    out = ['"']
    for position, char in enumerate(text):
        code = ord(char)
        if mask >> position & 1:
            if code > 0xFFFF:
                code -= 0x10000
                out.append("\\u" + hex_digits.format(0xD800 + (code >> 10)))
                out.append("\\u" + hex_digits.format(0xDC00 + (code & 0x3FF)))
            else:
                out.append("\\u" + hex_digits.format(code))
        elif char in _MUST_ESCAPE:
            out.append(_MUST_ESCAPE[char])
        elif code < 0x20:
            out.append("\\u" + hex_digits.format(code))
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


@st.composite
def spelled_json(draw: st.DrawFn, value: object) -> str:
    """One line of JSON for ``value`` as some writer may spell it: any whitespace between
    tokens, any key order, any characters of any string escaped (no newline outside a string)."""
    if isinstance(value, dict | list):
        inside, colon, comma = draw(st.tuples(_SPACES, _SPACES, _SPACES))
        if isinstance(value, dict):
            keys = draw(st.permutations(list(value)))
            items = [
                draw(_spelled_string(key)) + colon + ":" + colon + draw(spelled_json(value[key]))
                for key in keys
            ]
            opening, closing = "{", "}"
        else:
            items = [draw(spelled_json(item)) for item in value]
            opening, closing = "[", "]"
        return opening + inside + ("," + comma).join(items) + inside + closing
    if isinstance(value, str):
        return draw(_spelled_string(value))
    return json.dumps(value)


result_objects = st.fixed_dictionaries(
    {
        "type": st.just("result"),
        "subtype": st.sampled_from(["success", "error_during_execution", "error_max_turns"]),
        "is_error": st.booleans(),
        "session_id": st.text(max_size=12),
        "uuid": st.text(max_size=12),
    },
    optional={
        "result": st.text(max_size=20),
        "usage": st.fixed_dictionaries(
            {"input_tokens": st.integers(0, 9), "output_tokens": st.integers(0, 9)}
        ),
        "duration_ms": st.integers(0, 10**6),
        "x_note": st.sampled_from(["result", '"type":"result"', "tool_result", "\\u0075"]),
    },
)
"""Result lines as a claude-compatible CLI may write them (spell them with ``spelled_json``)."""
other_objects = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["stream_event", "assistant", "user", "system", "tool_result", "Result", "results"]
            ),
            "text": st.sampled_from(["result", '{"type":"result"}', '"result"', "plain"])
            | st.text(max_size=10),
        },
        optional={"subtype": st.sampled_from(["init", "result"]), "result": st.text(max_size=5)},
    ),
    st.fixed_dictionaries({"message": st.fixed_dictionaries({"type": st.just("result")})}),
    json_objects,
)
"""Lines that are not results, some of them full of the word."""
