"""hive._mcp: the one MCP tool server of hive's tool sets, served in-process to the SDK's client."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client

from hive import __version__
from hive._mcp import tool_result, tool_server

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ANSWER = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


async def test_a_tool_server_lists_each_declaration_as_is_in_either_spelling_and_answers_by_call_tool() -> (
    None
):
    declared = {"name": "echo", "description": "Say it.", "input_schema": SCHEMA, "output_schema": ANSWER}
    on_the_wire = {
        "name": "shout",
        "description": "Say it loud.",
        "inputSchema": SCHEMA,
        "outputSchema": ANSWER,
    }
    calls: list[tuple[str, dict[str, Any] | None]] = []

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        calls.append((params.name, params.arguments))
        text = str((params.arguments or {}).get("text"))
        return tool_result(text, {"message": text}, is_error=params.name == "shout")

    server = tool_server("test", instructions="Try echo.", tools=[declared, on_the_wire], call_tool=call_tool)
    async with Client(server) as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("test", __version__)
        assert client.instructions == "Try echo."
        listing = await client.list_tools()
        assert [(t.name, t.description, t.input_schema, t.output_schema) for t in listing.tools] == [
            ("echo", "Say it.", SCHEMA, ANSWER),
            ("shout", "Say it loud.", SCHEMA, ANSWER),
        ]
        said = await client.call_tool("echo", {"text": "hi"})
        assert said.content == [types.TextContent(type="text", text="hi")]
        assert said.structured_content == {"message": "hi"} and not said.is_error
        refused = await client.call_tool("shout", {"text": "no"})
        assert refused.is_error
    assert calls == [("echo", {"text": "hi"}), ("shout", {"text": "no"})]
