"""The MCP server every tool set of hive is served by (the SDK's low-level one).

Its tools are listed as they are declared (each schema as is); each call goes to the tool
set's own ``call_tool``, which answers with :func:`tool_result`. This module imports the MCP
SDK (it is what it is for): a program that must start without it imports this module only
once it serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server

from hive import __version__

__all__ = ["CallTool", "tool_result", "tool_server"]

CallTool = Callable[[Any, types.CallToolRequestParams], Awaitable[types.CallToolResult]]
"""A tool set's handler of ``tools/call``: the request's context and parameters, to its result."""


def tool_result(text: str, structured: dict[str, Any] | None, *, is_error: bool) -> types.CallToolResult:
    """A tool's answer: ``text`` for the model, ``structured`` as its structured content."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=is_error,
    )


def tool_server(
    name: str, *, instructions: str, tools: Iterable[Mapping[str, Any]], call_tool: CallTool
) -> Server[Any]:
    """The MCP server ``name`` of ``tools``, each a tool's declaration (``name``, ``description``,
    ``input_schema`` and ``output_schema``, or their wire names ``inputSchema``, ...)."""
    listing = types.ListToolsResult(tools=[types.Tool.model_validate(dict(tool)) for tool in tools])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    return Server(
        name,
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
