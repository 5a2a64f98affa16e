"""The subagent tools as the kit's MCP server (``hive.daemon``), served on the daemon's Unix socket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hive.daemon import ToolServer
from hive.subagent._caller import caller_of
from hive.subagent._errors import SubagentError
from hive.subagent._specs import INSTRUCTIONS, TOOLS
from hive.subagent._tools import Answer, SubagentTools, error_answer

REFUSAL_HINT = "run hive-subagent-mcp as uid {own} (or root), or give it a --state-dir of its own"


def make_mcp_server(tools: SubagentTools) -> ToolServer:
    """The MCP server of the subagent tools; each call is made for the caller its connection named."""

    async def call_tool(
        name: str, arguments: Any, _traceparent: str | None, client: Mapping[str, Any]
    ) -> Answer:
        try:
            caller = caller_of(client)
        except SubagentError as exc:
            return error_answer(exc)
        return await tools.call(name, arguments or {}, caller)

    return ToolServer(
        "subagent", instructions=INSTRUCTIONS, tools=TOOLS, call_tool=call_tool, refusal_hint=REFUSAL_HINT
    )
