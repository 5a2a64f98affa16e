"""What the model reads of a bash tool's answer costs what it needs (issue 41).

Claude Code shows the model the structured content, as compact JSON, in place of the text. So
an agent's answer keeps what it acts on (id, state, exit code, duration, the output's last
lines, where the rest is when they are not all of it, what to do next), and the rest of the
status (pid, times, paths, what holds the task, ...) comes with ``full`` (as the CLI asks).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from hive.bash import TAIL_BYTES, TOOLS, BashTools, Tail, ToolResult
from hive.bash.ends._describe import BRIEF_LINES, BRIEF_TAIL_BYTES, brief_output
from tests.helpers.tools import serving_tools

FULL_ONLY = {"cmd", "cwd", "pid", "held_by", "created_at", "started_at", "ended_at", "signals", "cmd_path"}
"""Fields of a task's status that its full status has and an agent's answer leaves out."""


def as_the_model_reads_it(result: ToolResult) -> str:
    """The answer as Claude Code gives it to the model: its structured content as compact JSON,
    else its text."""
    if result.structured is None:
        return result.text
    return json.dumps(result.structured, ensure_ascii=False, separators=(",", ":"))


@pytest.fixture
async def tools(short_tmp: Path) -> AsyncIterator[BashTools]:
    # An agent socket (nobody listens): the daemon promises wakes, as under hive-agent.
    async with serving_tools(short_tmp, agent_socket=short_tmp / "agent.sock") as tools:
        yield tools


SCHEMAS = {spec.name: spec.output_schema for spec in TOOLS}


async def call(tools: BashTools, tool: str, **arguments: Any) -> ToolResult:
    """The answer to ``tool``, checked against the tool's output schema."""
    with trio.fail_after(30):
        result = await tools.call(tool, arguments)
    if result.structured is not None:
        jsonschema.validate(result.structured, SCHEMAS[tool])
    return result


async def test_a_trivial_run_answers_what_the_model_acts_on_in_250_characters(tools: BashTools) -> None:
    result = await call(tools, "run", cmd="echo 'hi there'", wait_seconds=20)
    shown = as_the_model_reads_it(result)
    assert len(shown) <= 250, shown
    answer = result.structured
    assert answer is not None
    assert (answer["state"], answer["exit_code"], answer["stdout"]) == ("done", 0, {"tail": "hi there\n"})
    assert isinstance(answer["duration_secs"], float) and answer["id"] in answer["message"]
    assert "stderr" not in answer  # a stream with nothing in it is left out
    assert not FULL_ONLY & answer.keys()
    # The text, for a client that shows it, is as before: the command, the paths, what held it.
    assert "$ echo 'hi there'" in result.text and "whole output:" in result.text


async def test_a_started_run_says_what_to_do_next_and_no_paths(tools: BashTools) -> None:
    result = await call(tools, "run", cmd="sleep 30", name="slow", wait_seconds=0)
    try:
        await check_started(tools, result)
    finally:
        await call(tools, "stop", id="slow")


async def check_started(tools: BashTools, result: ToolResult) -> None:
    answer = result.structured
    assert answer is not None
    assert answer.keys() == {"id", "state", "message"}
    assert answer["message"] == (
        "task started: id=slow\nIt runs in the background; you will be woken by a message from "
        "bash-task-slow when it ends. status('slow', wait_seconds=30) waits for it, stop('slow') ends it."
    )
    full = await call(tools, "status", id="slow", full=True)
    assert full.structured is not None and full.structured["wake"] == "bash-task-slow"
    assert full.structured["stdout"]["path"].endswith("slow.out")


async def test_a_status_shows_the_last_lines_and_where_the_rest_is(tools: BashTools) -> None:
    await call(tools, "run", cmd="seq -f 'line %g of the output' 1 400", name="long", wait_seconds=20)
    brief = await call(tools, "status", id="long")
    full = await call(tools, "status", id="long", full=True)
    assert brief.structured is not None and full.structured is not None
    stdout = brief.structured["stdout"]
    assert stdout["tail"].splitlines() == [f"line {n} of the output" for n in range(381, 401)]
    assert stdout["bytes"] == full.structured["stdout"]["bytes"] > TAIL_BYTES
    assert stdout["path"] == full.structured["stdout"]["path"]
    assert len(as_the_model_reads_it(brief)) <= len(as_the_model_reads_it(full)) / 2
    assert brief.text == full.text


async def test_full_keeps_every_field_of_the_status(tools: BashTools) -> None:
    ended = await call(tools, "run", cmd="echo out; echo err >&2", name="t", wait_seconds=20, full=True)
    stopped = await call(tools, "stop", id="t", full=True)
    for result in (ended, stopped):
        answer = result.structured
        assert answer is not None
        assert answer.keys() >= FULL_ONLY, answer
        assert answer["stdout"] == {"tail": "out\n", "bytes": 4, "path": answer["cmd_path"][:-4] + ".out"}
        assert answer["stderr"]["tail"] == "err\n"
    assert ended.structured is not None and ended.structured["notes"] == []


async def test_an_error_is_its_text_alone(tools: BashTools) -> None:
    unknown = await call(tools, "status", id="no-such-task")
    assert unknown.is_error and unknown.structured is None
    assert unknown.text == "no task has id 'no-such-task'; `list` shows them all"
    # A program asks with full, and reads the error's kind.
    refused = await call(tools, "stop", id="no-such-task", full=True)
    assert refused.structured == {"error": "UnknownTask", "message": unknown.text}
    bad = await call(tools, "run", cmd="", full=True)
    assert bad.structured is not None and bad.structured["error"] == "BadArgument"


def tail_of(output: str, path: Path) -> Tail:
    data = output.encode()
    return Tail(data[-TAIL_BYTES:].decode(errors="ignore"), len(data), path)


@given(st.text(st.characters(blacklist_categories=["Cs"]), max_size=6000))
def test_the_brief_output_is_the_last_lines_and_says_where_the_rest_is(output: str) -> None:
    tail = tail_of(output, Path("/s/t.out"))
    brief = brief_output(tail)
    shown = brief["tail"]
    assert tail.text.endswith(shown)
    assert len(shown.encode()) <= BRIEF_TAIL_BYTES
    assert len(shown.splitlines()) <= BRIEF_LINES
    whole = shown == output
    assert ("path" in brief) is ("bytes" in brief) is (not whole)
    if not whole:
        assert (brief["path"], brief["bytes"]) == ("/s/t.out", tail.size)
