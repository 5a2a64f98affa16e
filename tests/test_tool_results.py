"""Structured content says what the text says: a `message` with the same guidance, and an output schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import mcp_types as types

from hive.bash import TOOLS
from tests.helpers.daemon import DaemonHandle
from tests.helpers.results import call, structured, text_of

SCHEMAS = {spec.name: spec.output_schema for spec in TOOLS}


def check(tool: str, result: types.CallToolResult) -> dict[str, Any]:
    """The result's structured content, after checking it against the tool's output schema."""
    content = structured(result)
    jsonschema.validate(content, SCHEMAS[tool])
    assert isinstance(content["message"], str) and content["message"]
    return content


async def test_every_structured_result_carries_the_texts_guidance(daemon: DaemonHandle) -> None:
    async with daemon.running(), daemon.session() as session:
        # A `run` that outlives its wait: the message is the text, wake and all.
        result = await call(session, "run", cmd="sleep 30", name="slow", wait_seconds=0)
        started = check("run", result)
        assert started["message"] == text_of(result)
        assert "you will be woken by a message from bash-task-slow when it ends" in started["message"]
        assert "status('slow', wait_seconds=30) waits for it" in started["message"]
        assert started["wake"] == "bash-task-slow"

        # `status` of a running task: the same guidance, and every line of it is in the text.
        result = await call(session, "status", id="slow")
        running = check("status", result)
        assert "you will be woken by a message from bash-task-slow" in running["message"]
        assert set(running["message"].splitlines()) <= set(text_of(result).splitlines())
        assert running["wake"] == "bash-task-slow"  # so a program (`hive bash`) need not read the text

        result = await call(session, "stop", id="slow")
        stopped = check("stop", result)
        assert stopped["message"].splitlines()[0] == text_of(result).splitlines()[0]
        assert "stopped on request" in stopped["message"]
        assert "woken" not in stopped["message"]
        assert "wake" not in stopped  # an ended task's status says nothing of a wake

        result = await call(session, "stop", id="slow")
        again = check("stop", result)
        assert again["message"].startswith("task slow had already ended; nothing to stop.\n")

        # A `run` that ends inside its wait, reusing the name: the note on the earlier task too.
        result = await call(session, "run", cmd="echo hi; exit 2", name="slow", wait_seconds=20)
        inline = check("run", result)
        assert inline["message"].splitlines()[0] == text_of(result).splitlines()[0]
        assert "done, exit code 2" in inline["message"]

        await call(session, "run", cmd="true", name="other", wait_seconds=20)
        listed = await call(session, "list", limit=1)
        assert check("list", listed)["message"] == (
            "1 of 2 tasks, newest first (1 older task not shown; pass limit=0 for all)"
        )

        # A tool error: for a program (full), the message is the text; for an agent, the text alone.
        for tool, args in (("status", {"id": "nope"}), ("run", {"cmd": ""})):
            error = await call(session, tool, **args)
            assert error.is_error
            content = check(tool, error)
            assert content["message"] == text_of(error)
            assert content["error"] in ("UnknownTask", "BadArgument")
            brief = await call(session, tool, **args, full=False)
            assert brief.is_error and brief.structured_content is None
            assert text_of(brief) == text_of(error)
        refused = await call(session, "list", limit=-1)
        assert refused.is_error and refused.structured_content is None and "limit" in text_of(refused)


async def test_a_daemon_without_an_agent_socket_promises_no_wake(served: DaemonHandle) -> None:
    async with served.session() as session:
        result = await call(session, "run", cmd="sleep 30", name="quiet", wait_seconds=0)
        started = check("run", result)
        assert started["wake"] is None and "woken" not in started["message"]
        assert "no wake will follow" in started["message"]
        assert "status('quiet', wait_seconds=30)" in started["message"]
        running = check("status", await call(session, "status", id="quiet"))
        assert "no wake will follow" in running["message"] and "woken" not in running["message"]
        assert running["wake"] is None
        check("stop", await call(session, "stop", id="quiet"))


async def test_tools_list_carries_each_tools_output_schema_and_the_sdk_client_validates_against_it(
    served: DaemonHandle,
) -> None:
    async with served.session() as session:
        listing = await session.list_tools()
        assert {tool.name: tool.output_schema for tool in listing.tools} == SCHEMAS
        # The SDK client validates each (non-error) result against the listed schema: these pass.
        for tool, args in (
            ("run", {"cmd": "sleep 30", "name": "t", "wait_seconds": 0}),
            ("status", {"id": "t"}),
            ("stop", {"id": "t"}),
            ("run", {"cmd": "echo done", "name": "t", "wait_seconds": 20}),
            ("list", {}),
        ):
            result = await call(session, tool, **args)
            assert not result.is_error, text_of(result)
