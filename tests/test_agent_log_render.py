"""The turn log's rendering of one tool result (``hive agent log``): an MCP tool's result that
claude passes on as its structured content shows the tool's text, not that content's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hive.agent._render import render_line, render_log
from tests.helpers.strategies import json_objects, spelled_json

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples"
STARTED = (
    "task started: id=build It runs in the background; you will be woken by a message from bash-task-build"
)


def sample(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / name).read_text().splitlines() if line.strip()]


def result_line(content: Any, tool_use_result: Any = None, **block: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": content, **block}],
        },
    }
    if tool_use_result is not None:
        line["tool_use_result"] = tool_use_result
    return line


def test_claudes_mcp_tool_result_shows_the_tools_text() -> None:
    # Real claude 2.1.318 under hive-agent: mcp__bash__run answered `task started`; the line's
    # content is the structured content as JSON, and tool_use_result has it as an object.
    lines = sample("15_mcp_tool_structured_content.jsonl")
    (result,) = [line for line in lines if line["type"] == "user"]
    assert (
        json.loads(result["message"]["content"][0]["content"])
        == result["tool_use_result"]["structuredContent"]
    )
    record = {"type": "hive", "turn": 1, "kind": "turn", "started": 1.0, "ended": 2.0, "outcome": "completed"}
    shown = list(render_log([*lines, record]))
    (arrow,) = [line for line in shown if line.startswith("   ← ")]
    assert arrow.startswith("   ← " + STARTED), shown
    assert len(arrow) <= len("   ← ") + 200  # still one short line
    assert render_line(result) == [arrow]  # as `--follow` shows it


@given(st.data())
def test_any_spelling_of_the_same_structured_content_shows_its_message(data: st.DataObject) -> None:
    structured = {**data.draw(json_objects), "message": data.draw(st.text(min_size=1, max_size=50))}
    content = data.draw(spelled_json(structured))
    as_blocks = data.draw(st.booleans())
    line = result_line(
        [{"type": "text", "text": content}] if as_blocks else content, {"structuredContent": structured}
    )
    expected = " ".join(structured["message"].split())
    assert render_line(line) == [f"   ← {expected or '(no output)'}"]


def test_a_result_that_is_not_its_structured_content_is_shown_as_it_is() -> None:
    structured = {"id": "t", "message": "task t: done"}
    cases = [
        # Built-in Bash: tool_use_result is its stdout and stderr, no structured content.
        (json.dumps(structured), {"stdout": json.dumps(structured), "stderr": ""}),
        # The content says something else than the structured content.
        (json.dumps({**structured, "id": "u"}), {"structuredContent": structured}),
        ("task t: done, exit code 0", {"structuredContent": structured}),
        # Structured content without a message: there is no text to show but the JSON.
        (json.dumps({"id": "t"}), {"structuredContent": {"id": "t"}}),
        # No tool_use_result at all (an ACP agent's line for a result that is not structured).
        (json.dumps(structured), None),
    ]
    for content, tool_use_result in cases:
        assert render_line(result_line(content, tool_use_result)) == [f"   ← {content}"], content


def test_an_error_keeps_its_mark() -> None:
    structured = {"error": "BadArguments", "message": "cmd: must not be empty"}
    line = result_line(json.dumps(structured), {"structuredContent": structured}, is_error=True)
    assert render_line(line) == ["   ← error: cmd: must not be empty"]
