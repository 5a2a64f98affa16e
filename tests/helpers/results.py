"""Reading an MCP tool call's answer."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession

FULL_ANSWERS = frozenset({"run", "status", "stop"})
"""The bash tools that answer every field of a task's status with ``full`` (as programs ask)."""

RUN_INPUT = {"cmd": "pytest -x", "name": "tests", "wait_seconds": 30}
"""A ``run`` call's arguments, as an agent gives them."""
ENDED = {
    "id": "tests",
    "state": "done",
    "exit_code": 1,
    "message": "task tests: done, exit code 1 after 0.02 s",
}
"""The structured answer to ``RUN_INPUT``: the task has ended."""


async def call(session: ClientSession, tool: str, **arguments: Any) -> types.CallToolResult:
    """Call ``tool`` with ``arguments`` on ``session``; a bash tool's answer as a program reads
    it (``full``) unless ``full`` is given (tests/test_answer_size.py proves an agent's)."""
    bash = session.server_info is not None and session.server_info.name == "bash"
    if bash and tool in FULL_ANSWERS:
        arguments.setdefault("full", True)
    return await session.call_tool(tool, arguments)


def text_of(result: types.CallToolResult) -> str:
    """The text blocks of an answer, joined by newlines."""
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The structured content of an answer (which must have one)."""
    assert result.structured_content is not None, text_of(result)
    return dict(result.structured_content)
