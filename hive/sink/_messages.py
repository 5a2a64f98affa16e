"""claude's stream-json messages as attrs types.

Each type names the fields a consumer of the stream reads; everything else a line holds
is kept in ``extra`` and written back unchanged, so a message round-trips through these
types without losing a key. A line of a type not known here becomes an UnknownMessage
that keeps the whole object.
"""

from __future__ import annotations

from typing import Any

import attrs

JsonObject = dict[str, Any]


# -- content blocks -------------------------------------------------------------------------------


@attrs.frozen
class TextBlock:
    """Text the agent wrote."""

    text: str
    type: str = "text"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class ThinkingBlock:
    """The agent's thinking (with the signature the API checks when it is sent back)."""

    thinking: str
    signature: str = ""
    type: str = "thinking"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class ToolUseBlock:
    """A call of a tool: its id, the tool's name and its input."""

    id: str
    name: str
    input: JsonObject = attrs.field(factory=dict)
    type: str = "tool_use"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class ToolResultBlock:
    """What a tool call (``tool_use_id``) returned."""

    tool_use_id: str
    content: str | list[JsonObject] | None = None
    is_error: bool | None = None
    type: str = "tool_result"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class UnknownBlock:
    """A content block of a kind not modelled here (redacted_thinking, server tools, images...)."""

    type: str
    data: JsonObject


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | UnknownBlock


# -- the Messages-API message inside assistant and user lines ---------------------------------------


@attrs.frozen
class Usage:
    """The tokens one API request used (``extra``: whatever else the API reported with them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    extra: JsonObject = attrs.field(factory=dict)

    @property
    def context_tokens(self) -> int:
        """Tokens this request put in the context window: its whole input plus its output."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )


@attrs.frozen
class ApiMessage:
    """The Messages-API message an assistant line carries."""

    content: list[ContentBlock]
    id: str = ""
    model: str = ""
    role: str = "assistant"
    type: str = "message"
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class UserContent:
    """What a user line carries: the prompt's text, or tool results."""

    content: str | list[ContentBlock]
    role: str = "user"
    extra: JsonObject = attrs.field(factory=dict)


# -- the lines ------------------------------------------------------------------------------------


@attrs.frozen
class SystemInit:
    """``system`` / ``init``: the session's metadata, at the start of each turn."""

    session_id: str
    model: str = ""
    cwd: str = ""
    tools: list[str] = attrs.field(factory=list)
    mcp_servers: list[JsonObject] = attrs.field(factory=list)
    permission_mode: str = ""
    claude_code_version: str = ""
    uuid: str = ""
    type: str = "system"
    subtype: str = "init"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class SystemMessage:
    """Any other ``system`` line: status, compact_boundary, api_retry, ..."""

    subtype: str
    session_id: str | None = None
    uuid: str = ""
    type: str = "system"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class AssistantMessage:
    """One completed content block of the model's answer."""

    message: ApiMessage
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    uuid: str = ""
    error: str | None = None
    type: str = "assistant"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class UserMessage:
    """A user-role message the CLI added: tool results, interruption markers, summaries."""

    message: UserContent
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    uuid: str = ""
    type: str = "user"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class ResultMessage:
    """The end of a turn."""

    subtype: str
    is_error: bool
    session_id: str | None = None
    duration_ms: int = 0
    duration_api_ms: int = 0
    num_turns: int = 0
    total_cost_usd: float = 0.0
    usage: JsonObject = attrs.field(factory=dict)
    model_usage: dict[str, JsonObject] = attrs.field(factory=dict)
    permission_denials: list[JsonObject] = attrs.field(factory=list)
    result: str | None = None
    errors: list[str] | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    uuid: str = ""
    type: str = "result"
    extra: JsonObject = attrs.field(factory=dict)

    @property
    def context_window(self) -> int | None:
        """The largest context window among the models this turn used, if reported."""
        windows = [u.get("contextWindow") for u in self.model_usage.values()]
        sizes = [w for w in windows if isinstance(w, int) and w > 0]
        return max(sizes) if sizes else None


@attrs.frozen
class StreamEvent:
    """A raw Messages-API streaming event (with ``--include-partial-messages``)."""

    event: JsonObject
    session_id: str | None = None
    parent_tool_use_id: str | None = None
    uuid: str = ""
    type: str = "stream_event"
    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class UnknownMessage:
    """A line of a type not modelled here, kept whole."""

    type: str
    data: JsonObject


StreamMessage = (
    SystemInit | SystemMessage | AssistantMessage | UserMessage | ResultMessage | StreamEvent | UnknownMessage
)
