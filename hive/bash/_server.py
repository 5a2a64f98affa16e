"""The bash tools as the kit's MCP server (``hive.daemon``), served on the daemon's Unix socket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from hive.bash._tools import TOOLS, BashTools, ToolResult
from hive.daemon import ToolServer

INSTRUCTIONS = (
    "Background shell execution. `run` starts a command and, if it ends within a few seconds, answers "
    "with its result; otherwise you are woken by a message from bash-task-<id> when it ends. `status` "
    "checks on or waits for a task, `stop` ends one, `list` shows them all."
)
REFUSAL_HINT = "run the MCP client as uid {own} (or root), or start a hive-bash-daemon of its own user with another --socket"


def make_mcp_server(tools: BashTools) -> ToolServer:
    """The MCP server of the bash tools."""

    async def call_tool(
        name: str, arguments: Any, traceparent: str | None, _client: Mapping[str, Any]
    ) -> ToolResult:
        # The span the client made the call in (the relay names the agent's turn), where it says.
        return await tools.call(name, arguments, traceparent=traceparent)

    return ToolServer(
        "bash",
        instructions=INSTRUCTIONS,
        tools=map(attrs.asdict, TOOLS),
        call_tool=call_tool,
        refusal_hint=REFUSAL_HINT,
    )
