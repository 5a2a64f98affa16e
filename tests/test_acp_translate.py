"""ACP session updates to claude's stream-json: where a tool call's tool_use goes and what it
carries (the input the agent settled on, written once), and its result read as claude's."""

from __future__ import annotations

import json
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import acp_agent
from hive.acp._outcome import Ending
from hive.acp._schema import SessionNotification, SessionUpdate, ToolCall, converter, from_wire, message_chunk
from hive.acp._translate import Translator
from hive.agent import render_line
from hive.sink import MemorySink
from tests.helpers.results import ENDED, RUN_INPUT
from tests.helpers.strategies import text_chunks, tool_updates

BASH = {"claudeCode": {"toolName": "Bash"}}


def wire(update: dict[str, Any]) -> SessionUpdate:
    """An update as an agent sends it in a session/update notification."""
    notification: SessionNotification = from_wire({"sessionId": "s", "update": update}, SessionNotification)
    return notification.update


def text(chunk: str) -> SessionUpdate:
    return wire({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk}})


def output(chunk: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": chunk}}]


def blocks(sink: MemorySink) -> list[dict[str, Any]]:
    """The content blocks written, in order (a ``result`` as ``{"type": "result"}``)."""
    found = []
    for line in sink.lines():
        message = json.loads(line)
        if message["type"] == "result":
            found.append({"type": "result"})
        elif message["type"] in ("assistant", "user"):
            found.extend(message["message"]["content"])
    return found


async def translate(*updates: SessionUpdate) -> MemorySink:
    sink = MemorySink()
    translator = Translator("s", sink)
    for update in updates:
        await translator.update(update)
    await translator.finish(Ending("success", False, "end_turn", "completed"))
    return sink


def tool_uses(sink: MemorySink) -> list[dict[str, Any]]:
    return [block for block in blocks(sink) if block["type"] == "tool_use"]


async def test_the_input_claude_agent_acp_sends_after_announcing_a_call_is_in_its_tool_use() -> None:
    sink = await translate(
        wire(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "toolu_1",
                "title": "Terminal",
                "kind": "execute",
                "status": "pending",
                "rawInput": {},
                "content": [],
                "_meta": BASH,
            }
        ),
        wire(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "toolu_1",
                "title": "`ls`",
                "kind": "execute",
                "rawInput": {"command": "ls", "description": "List files"},
                "_meta": BASH,
            }
        ),
        wire(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "toolu_1",
                "status": "completed",
                "content": output("a.txt"),
                "_meta": BASH,
            }
        ),
    )
    assert blocks(sink) == [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "Bash",
            "input": {"command": "ls", "description": "List files"},
        },
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": False},
        {"type": "result"},
    ]


async def test_an_input_in_a_pending_announcement_is_written_when_the_call_runs() -> None:
    sink = MemorySink()
    translator = Translator("s", sink)
    announced = {"toolCallId": "t1", "title": "run", "rawInput": {"command": "ls"}, "_meta": BASH}
    await translator.update(wire({"sessionUpdate": "tool_call", "status": "pending", **announced}))
    # A pending call's input may still grow (claude-agent-acp streams it in parts).
    assert tool_uses(sink) == []
    assert translator.tool_running
    await translator.update(
        wire({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"})
    )
    assert tool_uses(sink) == [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]


async def test_a_call_announced_with_no_input_is_written_with_none_when_it_ends() -> None:
    sink = MemorySink()
    translator = Translator("s", sink)
    await translator.update(
        wire({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Think", "rawInput": {}})
    )
    # Held back until the input comes, and running meanwhile.
    assert tool_uses(sink) == []
    assert translator.tool_running
    await translator.update(
        wire(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "failed",
                "content": output("no"),
            }
        )
    )
    assert not translator.tool_running
    assert blocks(sink) == [
        {"type": "tool_use", "id": "t1", "name": "Think", "input": {}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "no", "is_error": True},
    ]


async def test_a_call_still_pending_at_the_end_of_the_turn_keeps_its_tool_use_and_input() -> None:
    sink = MemorySink()
    translator = Translator("s", sink)
    # First heard of through an update that carries only its input: no name yet, so held back.
    await translator.update(
        wire({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": {"command": "sleep 9"}})
    )
    assert tool_uses(sink) == []
    assert translator.tool_running  # a cancelled turn is "aborted_tools"
    await translator.update(wire({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Wait"}))
    await translator.update(text("Waiting."))
    await translator.finish(Ending("error_during_execution", True, None, "aborted_tools"))
    assert blocks(sink) == [
        {"type": "tool_use", "id": "t1", "name": "tool", "input": {"command": "sleep 9"}},
        {"type": "tool_use", "id": "t2", "name": "Wait", "input": {}},
        {"type": "text", "text": "Waiting."},
        {"type": "result"},
    ]


async def test_text_a_tool_call_and_text_keep_their_order() -> None:
    sink = await translate(
        text("I will "),
        text("look."),
        wire(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Terminal",
                "rawInput": {},
                "_meta": BASH,
            }
        ),
        wire({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": {"command": "ls"}}),
        wire(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
                "content": output("a"),
            }
        ),
        text("Done."),
    )
    assert blocks(sink) == [
        {"type": "text", "text": "I will look."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "a", "is_error": False},
        {"type": "text", "text": "Done."},
        {"type": "result"},
    ]


async def test_an_empty_input_does_not_undo_a_known_one() -> None:
    sink = await translate(
        wire({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": {"command": "ls"}}),
        wire(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Terminal",
                "rawInput": {},
                "_meta": BASH,
            }
        ),
    )
    assert tool_uses(sink) == [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]


async def test_an_input_that_is_not_an_object_is_wrapped() -> None:
    sink = await translate(
        wire({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "shell", "rawInput": {}}),
        wire({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "rawInput": "ls -la"}),
    )
    assert tool_uses(sink) == [
        {"type": "tool_use", "id": "t1", "name": "shell", "input": {"input": "ls -la"}}
    ]


async def test_a_call_first_heard_of_when_it_has_ended_gets_both_blocks() -> None:
    sink = await translate(
        wire(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
                "rawInput": {"command": "ls"},
                "rawOutput": "a.txt",
            }
        ),
    )
    assert blocks(sink) == [
        {"type": "tool_use", "id": "t1", "name": "tool", "input": {"command": "ls"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt", "is_error": False},
        {"type": "result"},
    ]


# -- a call as claude-agent-acp reports it -----------------------------------------------------

REFUSED = {"error": "BadArguments", "message": "cmd: must not be empty"}


def claude_agent_acp(
    call_id: str = "toolu_1",
    tool_input: dict[str, Any] = RUN_INPUT,
    structured: dict[str, Any] = ENDED,
    **options: Any,
) -> tuple[list[SessionUpdate], list[SessionUpdate]]:
    """``mcp__bash__run`` as claude-agent-acp reports it: the updates before it runs and after."""
    output = acp_agent.claude_tool_output({"structured": structured})
    before, after = acp_agent.claude_tool_updates(call_id, "mcp__bash__run", tool_input, output, **options)
    return [wire(u) for u in before], [wire(u) for u in after]


def tool_result_lines(sink: MemorySink) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, sink.lines()) if m["type"] == "user"]


async def test_a_call_whose_input_streams_in_parts_is_written_once_with_the_whole_input() -> None:
    before, after = claude_agent_acp()
    sink = MemorySink()
    translator = Translator("s", sink)
    for update in before:
        await translator.update(update)
    assert tool_uses(sink) == []  # nothing in the updates says the input is complete
    for update in after:
        await translator.update(update)
    assert tool_uses(sink) == [
        {"type": "tool_use", "id": "toolu_1", "name": "mcp__bash__run", "input": RUN_INPUT}
    ]


async def test_a_permission_request_settles_the_input_before_the_call_runs() -> None:
    before, after = claude_agent_acp()
    sink = MemorySink()
    translator = Translator("s", sink)
    for update in before[:2]:  # announced, then its first field
        await translator.update(update)
    await translator.asked({"toolCallId": "toolu_1", "name": "mcp__bash__run", "rawInput": RUN_INPUT})
    assert tool_uses(sink) == [
        {"type": "tool_use", "id": "toolu_1", "name": "mcp__bash__run", "input": RUN_INPUT}
    ]
    for update in before[2:] + after:
        await translator.update(update)
    assert len(tool_uses(sink)) == 1
    assert len(tool_result_lines(sink)) == 1


async def test_a_permission_request_for_a_call_never_announced_writes_its_tool_use() -> None:
    sink = MemorySink()
    translator = Translator("s", sink)
    asked = {
        "toolCallId": "t9",
        "title": "Run",
        "rawInput": {"cmd": "ls"},
        "_meta": {"x": {"toolName": "mcp__bash__run"}},
    }
    await translator.asked(asked)
    assert tool_uses(sink) == [
        {"type": "tool_use", "id": "t9", "name": "mcp__bash__run", "input": {"cmd": "ls"}}
    ]
    assert translator.tool_running


async def test_a_structured_result_reads_as_claudes() -> None:
    for structured, is_error, shown in [
        (ENDED, False, "   ← task tests: done, exit code 1 after 0.02 s"),
        (REFUSED, True, "   ← error: cmd: must not be empty"),
    ]:
        before, after = claude_agent_acp(structured=structured, is_error=is_error)
        sink = await translate(*before, *after)
        (line,) = tool_result_lines(sink)
        assert line["tool_use_result"]["structuredContent"] == structured
        assert render_line(line) == [shown]


async def test_a_result_that_is_not_structured_reads_as_it_is() -> None:
    for raw_output, content in [
        ("plain words", None),
        ("[1, 2]", None),
        (None, output("from the content")),
        ("{not json", output("{not json")),
    ]:
        ended: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
        }
        if raw_output is not None:
            ended["rawOutput"] = raw_output
        if content is not None:
            ended["content"] = content
        sink = await translate(
            wire({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "t"}), wire(ended)
        )
        (line,) = tool_result_lines(sink)
        assert "tool_use_result" not in line
        text = content[0]["content"]["text"] if content else raw_output
        assert render_line(line) == [f"   ← {text}"]


@st.composite
def claude_agent_acp_turns(draw: st.DrawFn) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """Up to three calls as claude-agent-acp reports them, each with its input in parts (some
    skipped), settled by its result, by its permission request or by nothing (the turn ends), their
    updates interleaved with one another and with text; and each call's whole input."""
    keys = st.sampled_from(["cmd", "name", "wait_seconds", "cwd", "timeout_secs"])
    inputs = {}
    streams = []
    for number in range(draw(st.integers(1, 3))):
        call_id = f"toolu_{number}"
        names = draw(st.lists(keys, min_size=1, max_size=5, unique=True))
        tool_input = {name: draw(st.text(max_size=3) | st.integers()) for name in names}
        inputs[call_id] = tool_input
        parts = (
            draw(st.lists(st.integers(1, len(names) - 1), unique=True).map(sorted)) if len(names) > 1 else []
        )
        before, after = claude_agent_acp(call_id, tool_input, parts=parts)
        settled_by = draw(st.sampled_from(["result", "permission", "turn end"]))
        stream: list[Any] = list(before)
        if settled_by == "permission":
            stream.append({"asked": {"toolCallId": call_id, "rawInput": tool_input}})
        if settled_by != "turn end":
            stream += after
        streams.append(stream)
    streams.append(
        [text(draw(st.text("ab ", min_size=1, max_size=3))) for _ in range(draw(st.integers(0, 3)))]
    )
    merged = []
    while any(streams):
        stream = draw(st.sampled_from([s for s in streams if s]))
        merged.append(stream.pop(0))
    return merged, inputs


@settings(max_examples=300)
@given(claude_agent_acp_turns())
def test_any_partition_and_order_of_streamed_inputs_writes_each_whole_input_once(
    turn: tuple[list[Any], dict[str, dict[str, Any]]],
) -> None:
    updates, inputs = turn

    async def main() -> None:
        sink = MemorySink()
        translator = Translator("s", sink)
        for update in updates:
            if isinstance(update, dict):
                await translator.asked(update["asked"])
            else:
                await translator.update(update)
        await translator.finish(Ending("success", False, None, "completed"))
        written = blocks(sink)
        assert sorted(
            (b["id"], json.dumps(b["input"])) for b in written if b["type"] == "tool_use"
        ) == sorted((call_id, json.dumps(tool_input)) for call_id, tool_input in inputs.items())
        for block in written:
            if block["type"] == "tool_result":
                use = next(i for i, b in enumerate(written) if b.get("id") == block["tool_use_id"])
                assert use < written.index(block)

    trio.run(main)


# -- any interleaving ---------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.lists(tool_updates(output("out"), BASH) | text_chunks, max_size=12))
def test_any_interleaving_writes_each_call_once_with_its_input_before_its_result(
    updates: list[SessionUpdate],
) -> None:
    """For each call: one tool_use (none is lost), written once the call runs (or the turn ends),
    before its tool_result if any, carrying the last non-empty rawInput received before it ran (a
    non-object one wrapped)."""

    async def main() -> None:
        sink = MemorySink()
        translator = Translator("s", sink)
        latest: dict[str, dict[str, Any]] = {}
        expected: dict[str, dict[str, Any]] = {}
        ended: set[str] = set()

        ran: set[str] = set()

        def note_written() -> None:
            for block in tool_uses(sink):
                expected.setdefault(block["id"], latest.get(block["id"], {}))

        for update in updates:
            if isinstance(update, ToolCall):
                raw = update.raw_input
                if raw:
                    latest[update.tool_call_id] = raw if isinstance(raw, dict) else {"input": raw}
                latest.setdefault(update.tool_call_id, {})
                if update.status in ("in_progress", "completed", "failed"):
                    ran.add(update.tool_call_id)
                if update.status in ("completed", "failed"):
                    ended.add(update.tool_call_id)
            await translator.update(update)
            note_written()
            assert expected.keys() == ran
            assert translator.tool_running == bool(latest.keys() - ended)
        await translator.finish(Ending("success", False, None, "completed"))
        note_written()

        written = blocks(sink)
        uses = [b["id"] for b in written if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in written if b["type"] == "tool_result"]
        assert sorted(uses) == sorted(latest)
        assert sorted(results) == sorted(ended)
        for block in tool_uses(sink):
            assert block["input"] == expected[block["id"]]
        for tool_id in ended:
            use = next(i for i, b in enumerate(written) if b.get("id") == tool_id)
            result = next(i for i, b in enumerate(written) if b.get("tool_use_id") == tool_id)
            assert use < result

    trio.run(main)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_chunk_kinds = st.sampled_from(
    ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call", "plan"]
)
_updates = st.fixed_dictionaries(
    {"sessionUpdate": _chunk_kinds | _json},
    optional={
        "content": st.dictionaries(st.text(max_size=5), _json, max_size=3) | _json,
        "messageId": st.text(max_size=5) | _json,
        "_meta": _json,
    },
)
_notifications = (
    st.fixed_dictionaries(
        {"sessionId": st.text(max_size=5) | _json, "update": _updates | _json}, optional={"_meta": _json}
    )
    | _json
)


@settings(max_examples=400)
@given(_notifications)
def test_the_fast_path_of_a_message_chunk_structures_it_as_the_converter_does(obj: Any) -> None:
    fast = message_chunk(obj)
    if fast is None:
        return  # the converter's, as before
    assert fast == converter().structure(obj, SessionNotification)
    assert from_wire(obj, SessionNotification) == fast


def test_the_fast_path_takes_the_chunks_a_real_stream_is_made_of() -> None:
    chunk = {
        "sessionId": "s",
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
    }
    assert message_chunk(chunk) == from_wire(chunk, SessionNotification)
    assert message_chunk({**chunk, "update": {**chunk["update"], "messageId": "m1"}}) is not None
    assert message_chunk({**chunk, "update": {**chunk["update"], "sessionUpdate": "tool_call"}}) is None
