"""A tool set as the kit's MCP server offers it: its declarations, its instructions, its calls.

Its tools are listed as they are declared (each schema as is); each call goes to the tool set's
own ``call``. A call whose ``arguments`` is not an object is answered here as every other bad
argument is: a ``BadArgument`` tool error saying what was wrong (``hive._arguments``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

import attrs

from hive import __version__
from hive._arguments import ArgumentError, arguments_object

_WIRE_NAMES = {"input_schema": "inputSchema", "output_schema": "outputSchema"}


class ToolAnswer(Protocol):
    """What a tool set answers a call with."""

    @property
    def text(self) -> str: ...
    @property
    def structured(self) -> Mapping[str, Any] | None: ...
    @property
    def is_error(self) -> bool: ...
    @property
    def delivered(self) -> Callable[[bool], None] | None:
        """For an answer that carries an end the agent is owed: called once the answer is
        written, with whether the agent itself was still there to read it."""


CallTool = Callable[[str, Any, "str | None", Mapping[str, Any]], Awaitable[ToolAnswer]]
"""A tool set's handler of a call: the tool's name, its arguments (None if left out), the span
the client made the call in (its ``_meta.traceparent``), and the client's ``initialize`` params
(empty before it sent them; the relay says who calls in their ``_meta``), to its answer."""


@attrs.frozen
class PlainAnswer:
    """A `ToolAnswer` that carries no end the agent is owed: text for the agent, and the same as
    structured content (always with ``message``)."""

    text: str
    structured: Mapping[str, Any]
    is_error: bool = False
    delivered: None = None


def _wire_tools(tools: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Each tool's declaration with its wire names (``inputSchema``, ...), either spelling given."""
    return tuple(_wire_tool(tool) for tool in tools)


@attrs.frozen
class ToolServer:
    """The MCP server ``name`` of a tool set: what ``initialize``, ``tools/list`` and
    ``tools/call`` answer. ``refusal_hint`` tells a peer the uid check refuses what to do."""

    name: str
    instructions: str
    tools: tuple[dict[str, Any], ...] = attrs.field(converter=_wire_tools)
    call_tool: CallTool
    refusal_hint: str = "run the MCP client as uid {own} (or root)"

    @property
    def server_info(self) -> dict[str, str]:
        return {"name": self.name, "version": __version__}

    def listing(self) -> dict[str, Any]:
        return {"tools": list(self.tools)}

    async def call(
        self, name: str, arguments: object, traceparent: str | None, client: Mapping[str, Any]
    ) -> ToolAnswer:
        schema = next((tool["inputSchema"] for tool in self.tools if tool["name"] == name), None)
        try:
            arguments_object(schema or {}, arguments)
        except ArgumentError as exc:
            if schema is not None:
                return PlainAnswer(str(exc), {"error": "BadArgument", "message": str(exc)}, is_error=True)
            arguments = None  # no such tool: the tool set says so, whatever the arguments
        return await self.call_tool(name, arguments, traceparent, client)


def tool_result(answer: ToolAnswer) -> dict[str, Any]:
    """A tool's answer as MCP's ``CallToolResult``."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": answer.text}], "isError": answer.is_error}
    if answer.structured is not None:
        result["structuredContent"] = dict(answer.structured)
    return result


def _wire_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    wire = {_WIRE_NAMES.get(key, key): value for key, value in tool.items() if value is not None}
    wire.setdefault("inputSchema", {"type": "object"})
    return wire
