"""The MCP server every tool set of hive is served by (the SDK's low-level one).

Its tools are listed as they are declared (each schema as is); each call goes to the tool
set's own ``call_tool``, which answers with :func:`tool_result`. A call whose ``arguments`` is
not an object (which the SDK would refuse with a bare ``-32602``, before any tool set sees it)
is answered here as every other bad argument is: a ``BadArgument`` tool error saying what was
wrong. This module imports the MCP SDK (it is what it is for): a program that must start
without it imports this module only once it serves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server

from hive import __version__
from hive._arguments import ArgumentError, arguments_object

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

    schemas = {tool.name: tool.input_schema for tool in listing.tools}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def arguments_checked(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        # Before the SDK validates the call's params: it would refuse these without a word.
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            schema = schemas.get(str(params.get("name")))
            try:
                arguments_object(schema or {}, params.get("arguments"))
            except ArgumentError as exc:
                if schema is None:  # no such tool: the tool set says so, whatever the arguments
                    return await call_next(dataclasses.replace(ctx, params={**params, "arguments": None}))
                refused = tool_result(str(exc), {"error": "BadArgument", "message": str(exc)}, is_error=True)
                # Answered here, it is sent as given: only what a tool's answer holds on the wire.
                return refused.model_dump(by_alias=True, mode="json", exclude_unset=True)
        return await call_next(ctx)

    server: Server[Any] = Server(
        name,
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(arguments_checked)
    return server
