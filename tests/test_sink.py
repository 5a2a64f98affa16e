"""hive.sink: typed stream-json messages, line framing, and the sinks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.sink import (
    AssistantMessage,
    Batch,
    ContextUsage,
    FanOut,
    JsonlSink,
    LineFramer,
    MemorySink,
    MessageError,
    ResultMessage,
    StreamEvent,
    SystemInit,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
    UnknownBlock,
    UnknownMessage,
    UserMessage,
    encode_message,
    first_message,
    last_message,
    parse_line,
    structure_message,
    typed_lines,
    unstructure_message,
)
from tests.helpers.strategies import (
    json_objects,
    line_pads,
    other_objects,
    result_objects,
    spelled_json,
    stream_messages,
)

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples"


def sample_lines() -> list[bytes]:
    lines = []
    for path in sorted(SAMPLES.glob("*.jsonl")):
        if "transcript" not in path.name:
            lines += [line for line in path.read_bytes().splitlines() if line.strip()]
    return lines


def test_every_real_line_keeps_every_key_through_the_types() -> None:
    lines = sample_lines()
    assert len(lines) > 50
    kinds = set()
    for line in lines:
        original = json.loads(line)
        message = parse_line(line)
        kinds.add(type(message).__name__)
        assert unstructure_message(message) | original == unstructure_message(message)
        for key, value in original.items():
            assert unstructure_message(message)[key] == value, key
    assert {
        "SystemInit",
        "SystemMessage",
        "AssistantMessage",
        "UserMessage",
        "ResultMessage",
        "StreamEvent",
    } <= kinds


def test_typed_views_of_the_common_lines() -> None:
    init = parse_line(
        b'{"type":"system","subtype":"init","session_id":"s1","model":"m","permissionMode":"default","tools":["Bash"],"new":1}'
    )
    assert isinstance(init, SystemInit)
    assert (init.session_id, init.permission_mode, init.extra) == ("s1", "default", {"new": 1})
    assistant = parse_line(
        b'{"type":"assistant","message":{"id":"m1","model":"x","role":"assistant","content":'
        b'[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"server_thing","a":1}],'
        b'"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":2}},"session_id":"s1"}'
    )
    assert isinstance(assistant, AssistantMessage)
    tool, other = assistant.message.content
    assert isinstance(tool, ToolUseBlock) and tool.input == {"command": "ls"}
    assert isinstance(other, UnknownBlock) and other.data == {"type": "server_thing", "a": 1}
    assert assistant.message.usage is not None and assistant.message.usage.context_tokens == 17
    result = parse_line(
        b'{"type":"result","subtype":"success","is_error":false,"session_id":"s1","result":"hi",'
        b'"modelUsage":{"a":{"contextWindow":200000},"b":{"contextWindow":1000000}}}'
    )
    assert isinstance(result, ResultMessage)
    assert (result.result, result.context_window) == ("hi", 1000000)
    assert isinstance(parse_line(b'{"type":"system","subtype":"status","status":null}'), SystemMessage)
    assert isinstance(parse_line(b'{"type":"stream_event","event":{"type":"ping"}}'), StreamEvent)
    assert isinstance(parse_line(b'{"type":"user","message":{"role":"user","content":"x"}}'), UserMessage)
    unknown = parse_line(b'{"type":"rate_limit_event","rate_limit_info":{}}')
    assert isinstance(unknown, UnknownMessage) and unknown.type == "rate_limit_event"


@pytest.mark.parametrize(
    "line",
    [b"not json", b"[1,2]", b'"text"', b'{"type":"result"}', b'{"type":"assistant","message":5}'],
)
def test_a_bad_line_raises_message_error(line: bytes) -> None:
    with pytest.raises(MessageError):
        parse_line(line)


@given(stream_messages)
def test_typed_messages_round_trip(message: object) -> None:
    encoded = encode_message(message)  # type: ignore[arg-type]
    assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
    assert parse_line(encoded) == message


@given(json_objects)
def test_any_object_is_a_message_or_a_message_error(obj: dict[str, object]) -> None:
    try:
        message = structure_message(obj)
    except MessageError:
        return
    for key, value in obj.items():
        assert unstructure_message(message)[key] == value


# -- framing ----------------------------------------------------------------------------------


def frame(chunks: list[bytes]) -> tuple[bytes, list[str]]:
    framer = LineFramer(max_line=1000)
    out, reasons = b"", []
    for chunk in chunks:
        batch, dropped = framer.feed(chunk)
        out += batch.data if batch else b""
        reasons += [d.reason for d in dropped]
    batch, dropped = framer.close()
    out += batch.data if batch else b""
    reasons += [d.reason for d in dropped]
    return out, reasons


def test_clean_lines_pass_unchanged_however_they_are_cut() -> None:
    data = b"".join(line + b"\n" for line in sample_lines()[:40])
    for size in (1, 7, 100, 4096, len(data)):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        framer = LineFramer()
        out = b""
        for chunk in chunks:
            batch, dropped = framer.feed(chunk)
            assert not dropped
            out += batch.data if batch else b""
        assert out == data


def test_garbage_lines_are_dropped_and_later_lines_kept() -> None:
    out, reasons = frame([b'{"a":1}\n[SandboxDebug] x\n\n{"b":', b"2}\n{broken\n", b'{"c":3}\n{"tail":'])
    assert out == b'{"a":1}\n{"b":2}\n{"c":3}\n'
    assert reasons == [
        "not a stream-json object",
        "not a stream-json object",
        "the output ended in the middle of a line",
    ]


def test_a_last_line_without_a_newline_is_kept_if_it_parses() -> None:
    assert frame([b'{"a":1}\n{"b":2}']) == (b'{"a":1}\n{"b":2}\n', [])


def test_an_overlong_line_is_dropped_and_the_stream_recovers() -> None:
    out, reasons = frame([b'{"a":1}\n{"x":"', b"y" * 600, b"y" * 600, b'"}\n{"b":2}\n'])
    assert out == b'{"a":1}\n{"b":2}\n'
    assert reasons == ["a line longer than 1000 bytes"]


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_the_framer_only_ever_emits_brace_lines(chunks: list[bytes]) -> None:
    out, _ = frame(chunks)
    for line in out.split(b"\n")[:-1]:
        assert line.startswith(b"{") and line.endswith(b"}")
    assert out == b"" or out.endswith(b"\n")


# -- sinks ------------------------------------------------------------------------------------


async def test_jsonl_sink_writes_batches_as_they_come(tmp_path: Path) -> None:
    path = tmp_path / "turn.jsonl"
    sink = JsonlSink.to_path(path)
    first = Batch.of([SystemInit(session_id="s1")])
    await sink.write(first)
    assert path.read_bytes() == first.data  # written through, nothing held back
    await sink.write(Batch(b'{"type":"custom","x":1}\n'))
    await sink.context_usage(ContextUsage(10, 100))
    await sink.aclose()
    assert path.read_bytes().splitlines()[1] == b'{"type":"custom","x":1}'


async def test_memory_sink_and_fan_out() -> None:
    a, b = MemorySink(), MemorySink()
    fan = FanOut([a, b])
    message = AssistantMessage(
        message=__import__("hive.sink", fromlist=["ApiMessage"]).ApiMessage(content=[TextBlock("hi")])
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.wait_for_lines, 2)
        await fan.write(Batch.of([message, {"type": "x"}]))
    await fan.context_usage(ContextUsage(50, 200))
    for sink in (a, b):
        assert sink.types() == ["assistant", "x"]
        assert sink.usages == [ContextUsage(50, 200)]
        assert sink.usages[0].fraction == 0.25


async def test_jsonl_sink_to_a_pipe_whose_reader_is_slow() -> None:
    read_fd, write_fd = os.pipe()
    sink = JsonlSink(write_fd)
    big = Batch(b'{"x":"' + b"y" * 200_000 + b'"}\n')
    received = bytearray()

    async def reader() -> None:
        stream = trio.lowlevel.FdStream(read_fd)
        while len(received) < len(big.data):
            received.extend(await stream.receive_some(4096))
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await sink.write(big)  # larger than the pipe's buffer: must not block the event loop
    await sink.aclose()
    assert bytes(received) == big.data


# -- the result line, by what it means (issue 20, item 6) ----------------------------------------


def framed(lines: list[str], pads: list[str]) -> Batch:
    """The lines as the framer hands them on, each with some whitespace around it."""
    data = "".join(pad + line + pad + "\n" for line, pad in zip(lines, pads, strict=True)).encode()
    batch, dropped = LineFramer().feed(data)
    assert dropped == []
    assert batch is not None
    return batch


@given(st.data(), result_objects, st.lists(other_objects, max_size=4), st.lists(other_objects, max_size=4))
@settings(max_examples=80)
def test_a_result_is_found_however_it_is_spelled(
    data: st.DataObject,
    result: dict[str, object],
    before: list[dict[str, object]],
    after: list[dict[str, object]],
) -> None:
    objects = [*before, result, *after]
    lines = [data.draw(spelled_json(obj)) for obj in objects]
    batch = framed(lines, data.draw(st.lists(line_pads, min_size=len(lines), max_size=len(lines))))
    assert [json.loads(line) for line in batch.lines()] == objects
    results = [index for index, obj in enumerate(objects) if obj.get("type") == "result"]
    found = first_message(batch, b'"result"', "result")
    assert found is not None
    index, message = found
    assert index == results[0]
    assert isinstance(message, ResultMessage)
    assert (message.subtype, message.is_error, message.session_id) == (
        objects[index]["subtype"],
        objects[index]["is_error"],
        objects[index]["session_id"],
    )
    last = last_message(batch, b'"result"', "result")
    assert isinstance(last, ResultMessage)
    assert last.uuid == objects[results[-1]]["uuid"]


@given(st.data(), st.lists(result_objects | other_objects, min_size=1, max_size=8))
@settings(max_examples=80)
def test_the_lines_taken_for_results_are_exactly_the_results(
    data: st.DataObject, objects: list[dict[str, object]]
) -> None:
    lines = [data.draw(spelled_json(obj)) for obj in objects]
    batch = framed(lines, [""] * len(lines))
    taken = [index for index, _, _ in typed_lines(batch, {"result": b'"result"'})]
    assert taken == [index for index, obj in enumerate(objects) if obj.get("type") == "result"]
    inits = [index for index, _, _ in typed_lines(batch, {"system/init": b'"init"'})]
    assert inits == [
        index
        for index, obj in enumerate(objects)
        if obj.get("type") == "system" and obj.get("subtype") == "init"
    ]


def test_the_spellings_of_the_issue_are_results() -> None:
    for line in (
        b'{"type": "result", "subtype": "success", "is_error": false, "session_id": "s"}',
        b'{"session_id":"s","is_error":false,"subtype":"success","type":"result"}',
        b'{"type":"res\\u0075lt","subtype":"success","is_error":false,"session_id":"s"}',
        b'{"t\\u0079pe":"\\u0072esult","subtype":"success","is_error":false,"session_id":"s"}',
    ):
        found = first_message(
            Batch(b'{"type":"user","message":{"content":"result"}}\n' + line + b"\n"), b'"result"', "result"
        )
        assert found is not None and found[0] == 1, line
