"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import strategies as st

from hive.acp import AgentExited, JsonRpcError
from hive.acp._schema import MessageChunk, ToolCall
from hive.agent import ItemKind
from hive.bash import LooseEnd, OwedWake, TaskRecord, encode
from hive.bash._model import Event, Exited, Spawned, StopBegun, StopReason, TaskState, Vanished, Withdrawn
from hive.bash.files._retention import Candidate, Retention
from hive.sink._messages import BLOCKS
from hive.sink._stream_json import _RENAMES, written_annotations

stop_reasons = st.sampled_from(StopReason)
events: st.SearchStrategy[Event] = st.one_of(
    st.just(Spawned()),
    st.builds(StopBegun, stop_reasons),
    st.just(Exited()),
    st.just(Vanished()),
    st.just(Withdrawn()),
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
    queued=st.none() | st.integers(min_value=1, max_value=2**40),
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


# -- JSON of any shape, and lines that may or may not be JSON --------------------------------------


def json_trees(
    scalars: st.SearchStrategy[Any], *, keys: st.SearchStrategy[str], width: int, leaves: int
) -> st.SearchStrategy[Any]:
    """JSON-like values: ``scalars``, and lists and objects (``keys``) of up to ``width`` of them."""
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=width) | st.dictionaries(keys, inner, max_size=width),
        max_leaves=leaves,
    )


def _scalars(text: st.SearchStrategy[str], floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    return st.none() | st.booleans() | st.integers() | floats | text


rpc_json = json_trees(
    _scalars(st.text(), st.floats(allow_nan=False)), keys=st.text(max_size=6), width=3, leaves=10
)
"""What a JSON-RPC line may hold (the bash daemon's `misread`)."""
wake_json = json_trees(_scalars(st.text(), st.floats(allow_nan=False)), keys=st.text(), width=3, leaves=8)
"""What a field of an agent-socket request may hold."""
agent_json = json_trees(
    _scalars(st.text(max_size=20), st.floats(allow_nan=False)), keys=st.text(max_size=8), width=3, leaves=6
)
"""The same, smaller: for whole conversations with a harness."""
loose_json = json_trees(_scalars(st.text(), st.floats()), keys=st.text(max_size=8), width=4, leaves=12)
"""What a file in the loose-ends directory may hold (NaN too: Python's json writes it)."""

wake_request_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["wake", "prompt", "compact", "status"]) | wake_json,
        "from": wake_json,
        "body": wake_json,
        "text": wake_json,
        "transient": wake_json,
        "end_id": wake_json,
    },
)
"""Objects shaped more or less like an agent-socket request."""

agent_requests = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["wake", "prompt", "compact", "status", "nap"]) | agent_json,
        "from": agent_json,
        "body": agent_json,
        "text": agent_json,
        "end_id": agent_json,
    },
).map(lambda raw: json.dumps(raw).encode())
"""Agent-socket request lines, well-formed or not."""
junk_lines = st.binary(max_size=200).map(lambda b: b.replace(b"\n", b""))
"""A line of bytes (no newline in it)."""
agent_lines = st.lists(agent_requests | junk_lines, min_size=1, max_size=8)
"""A conversation's worth of lines for the agent socket."""

_socket_lines = st.binary(max_size=512).map(lambda b: b.replace(b"\n", b""))


def socket_payloads(initialize: bytes) -> st.SearchStrategy[bytes]:
    """What a client may write on one connection: bytes, lines of them, and an MCP ``initialize``
    line followed by junk or cut short."""
    return st.one_of(
        st.binary(max_size=4096),
        st.lists(_socket_lines, max_size=5).map(lambda ls: b"\n".join(ls) + b"\n"),
        st.lists(st.binary(max_size=64)).map(b"\n".join),
        st.builds(lambda junk: initialize + junk, st.binary(max_size=256)),
        st.builds(lambda n: initialize[:n], st.integers(min_value=0, max_value=len(initialize))),
    )


# -- the loose-ends directory ----------------------------------------------------------------------

loose_end_like = st.fixed_dictionaries(
    {},
    optional={
        "task_id": loose_json | st.text(),
        "serial": loose_json | st.text(),
        "cmd": loose_json | st.text(),
        "since": loose_json | st.floats(),
        "wake": loose_json | st.fixed_dictionaries({"sender": loose_json, "body": loose_json}),
    },
)
"""Objects shaped more or less like a loose end."""
loose_end_files = st.one_of(
    st.binary(max_size=200),
    loose_json.map(lambda v: json.dumps(v).encode()),
    loose_end_like.map(lambda v: json.dumps(v).encode()),
    loose_ends.map(encode),
    records.map(encode),
)
"""What a file in the loose-ends (or tasks) directory may hold."""


# -- retention -------------------------------------------------------------------------------------


@st.composite
def listings(draw: st.DrawFn, now: float) -> list[Candidate]:
    """Runs to choose from, ended between 0 and ``now`` (small whole numbers: ties come up often)."""
    keys = draw(
        st.lists(st.tuples(task_ids, st.integers(0, 3)), unique=True, max_size=30),
    )
    return [
        Candidate(
            task_id=task_id,
            generation=generation,
            ended_at=float(draw(st.integers(0, int(now)))),
            size=draw(st.integers(0, 100)),
            protected=draw(st.booleans()),
        )
        for task_id, generation in keys
    ]


def retentions(now: float) -> st.SearchStrategy[Retention]:
    """Retention policies whose age limits fall between 0 and ``now``."""
    return st.builds(
        Retention,
        max_age=st.integers(0, int(now)).map(float),
        max_bytes=st.none() | st.integers(0, 1500),
    )


# -- the harness's loop and queue ------------------------------------------------------------------

loop_operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("arrive"), st.sampled_from(ItemKind), st.none() | st.sampled_from(["e1", "e2", "e3"])
        ),
        st.tuples(
            st.just("end"),
            st.sampled_from(["complete", "idle", "unavailable", "session_not_found", "fail_after_result"]),
        ),
        st.tuples(st.just("compact"), st.sampled_from(["operator", "agent"])),
        st.tuples(st.just("restart")),
    ),
    max_size=25,
)
"""What happens to a harness, in order: arrivals, turn ends, compactions, restarts."""
queue_operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.none() | st.sampled_from(["a", "b"])),
        st.tuples(st.just("carry")),
        st.tuples(st.just("compact"), st.sampled_from(["operator", "agent"])),
        st.tuples(st.just("compacted")),
    ),
    max_size=30,
)
"""What is done to a queue file, in order."""
end_ids = st.none() | st.sampled_from([f"t{n}:s" for n in range(6)])
"""A wake's end id, or none: few, so that repeats come up."""


# -- ACP -------------------------------------------------------------------------------------------

acp_notifications = st.text(max_size=50).map(
    lambda text: {"jsonrpc": "2.0", "method": "session/update", "params": {"text": text}}
)


def over_long_lines(limit: int) -> st.SearchStrategy[bytes]:
    """Lines over ``limit`` bytes of repeated fragments (some message-like); "#" keeps each from being JSON."""
    message = json.dumps({"jsonrpc": "2.0", "method": "no"}).encode() + b"\n"
    return st.builds(
        lambda size, fragment: b"#" + (fragment * size)[:size].replace(b"\n", b" ") + b"\n",
        st.integers(limit + 1, 3 * limit),
        st.one_of(st.binary(min_size=1, max_size=16), st.just(message)),
    )


blank_lines = st.sampled_from([b"\n", b"  \n", b"\r\n"])
prompt_answers = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"stopReason": st.sampled_from(["end_turn", "cancelled", "max_turn_requests", "refusal"])}
    ),
    st.just({"stopReason": 5}),  # not ACP's shape
)
"""What an agent may answer a `session/prompt` with (or not at all)."""
prompt_failures = st.one_of(
    st.none(),
    st.builds(JsonRpcError, st.sampled_from([-32603, -32800, -32000]), st.just("boom")),
    st.builds(AgentExited, st.none() | st.integers(0, 255), st.just("")),
)
"""How a `session/prompt` may fail (or not)."""
_raw_inputs = st.one_of(
    st.none(),
    st.just({}),
    st.builds(lambda command: {"command": command}, st.text(min_size=1, max_size=5)),
    st.text(min_size=1, max_size=5),
)


def tool_updates(content: list[dict[str, Any]], meta: dict[str, Any]) -> st.SearchStrategy[ToolCall]:
    """`tool_call` and `tool_call_update` of three calls, with or without ``content`` and ``meta``."""
    return st.builds(
        ToolCall,
        session_update=st.sampled_from(["tool_call", "tool_call_update"]),
        tool_call_id=st.sampled_from(["a", "b", "c"]),
        title=st.none() | st.just("Terminal"),
        kind=st.none() | st.just("execute"),
        status=st.none() | st.sampled_from(["pending", "in_progress", "completed", "failed"]),
        content=st.none() | st.just(content),
        raw_input=_raw_inputs,
        meta=st.none() | st.just(meta),
    )


text_chunks = st.builds(
    MessageChunk,
    session_update=st.just("agent_message_chunk"),
    content=st.builds(lambda t: {"type": "text", "text": t}, st.text(min_size=1, max_size=3)),
)


# -- the sink's shortcut ---------------------------------------------------------------------------

line_pads = st.sampled_from(["", " ", "\t", " \r"])
"""What may surround a stream-json line."""
shortcut_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
shortcut_blocks = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "tool_use", "tool_result", "image"])}
    ),
    st.deferred(lambda: objects_of(st.sampled_from(sorted(BLOCKS.values(), key=lambda c: c.__name__)))),
)
TYPED: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=5),
    "int": st.integers(-(2**70), 2**70),
    "bool": st.booleans(),
    "float": st.floats(allow_nan=False) | st.integers(-(2**1100), 2**1100),
    "str | None": st.none() | st.text(max_size=5),
    "bool | None": st.none() | st.booleans(),
    "JsonObject": shortcut_objects,
    "list[str]": st.lists(st.text(max_size=5), max_size=3),
    "list[str] | None": st.none() | st.lists(st.text(max_size=5), max_size=3),
    "list[JsonObject]": st.lists(shortcut_objects, max_size=2),
    "dict[str, JsonObject]": st.dictionaries(st.text(max_size=5), shortcut_objects, max_size=2),
    "str | list[JsonObject] | None": json_values,
    "list[ContentBlock]": st.lists(shortcut_blocks, max_size=2),
    "str | list[ContentBlock]": st.text(max_size=5) | st.lists(shortcut_blocks, max_size=2),
    "Usage | None": st.none() | st.deferred(lambda: objects_of(st.just(Usage))),
    "ApiMessage": st.deferred(lambda: objects_of(st.just(ApiMessage))),
    "UserContent": st.deferred(lambda: objects_of(st.just(UserContent))),
}
"""A value of each field type of the sink's message classes."""


def objects_of(classes: st.SearchStrategy[type]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects for one of ``classes`` (see `objects_for`)."""
    return classes.flatmap(lambda cls: objects_for(st.just(cls)).map(lambda case: case[1]))


@st.composite
def objects_for(
    draw: st.DrawFn, classes: st.SearchStrategy[type] | None = None
) -> tuple[type, dict[str, Any]]:
    """A class, and an object with its fields' wire names: most values of the field's type, some
    of another (or missing), and keys it does not name."""
    cls = draw(st.sampled_from(sorted(_RENAMES, key=lambda c: c.__name__)) if classes is None else classes)
    obj: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.name == "extra":
            continue
        choice = draw(st.integers(0, 19))
        if choice == 0:
            continue
        typed = TYPED[written_annotations(cls)[field.name]] if choice > 1 else json_values
        obj[_RENAMES[cls].get(field.name, field.name)] = draw(typed)
    obj.update(draw(st.dictionaries(st.sampled_from(["extra", "x", "y"]), json_values, max_size=2)))
    return cls, obj
