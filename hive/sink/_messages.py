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


@attrs.frozen(kw_only=True)
class _Extensible:
    """A type that names only some of its object's keys: the others are kept in ``extra`` and
    written back unchanged (a keyword argument)."""

    extra: JsonObject = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class _Line(_Extensible):
    """What every typed line carries beside its own fields (keyword arguments)."""

    session_id: str | None = None
    uuid: str = ""


@attrs.frozen(kw_only=True)
class _ConversationLine(_Line):
    """A line of the conversation itself, the agent's or a subagent's (``parent_tool_use_id``:
    the tool call the subagent runs under)."""

    parent_tool_use_id: str | None = None


# -- content blocks -------------------------------------------------------------------------------


@attrs.frozen
class TextBlock(_Extensible):
    """Text the agent wrote."""

    text: str
    type: str = "text"


@attrs.frozen
class ThinkingBlock(_Extensible):
    """The agent's thinking (with the signature the API checks when it is sent back)."""

    thinking: str
    signature: str = ""
    type: str = "thinking"


@attrs.frozen
class ToolUseBlock(_Extensible):
    """A call of a tool: its id, the tool's name and its input."""

    id: str
    name: str
    input: JsonObject = attrs.field(factory=dict)
    type: str = "tool_use"


@attrs.frozen
class ToolResultBlock(_Extensible):
    """What a tool call (``tool_use_id``) returned."""

    tool_use_id: str
    content: str | list[JsonObject] | None = None
    # claude (2.1.318) leaves it out of an MCP tool's result: written back only when known.
    is_error: bool | None = attrs.field(default=None, metadata={"omit_if_none": True})
    type: str = "tool_result"


@attrs.frozen
class UnknownBlock:
    """A content block of a kind not modelled here (redacted_thinking, server tools, images...)."""

    type: str
    data: JsonObject


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock | UnknownBlock


# -- the Messages-API message inside assistant and user lines ---------------------------------------


@attrs.frozen
class Usage(_Extensible):
    """The tokens one API request used (``extra``: whatever else the API reported with them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

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
class ApiMessage(_Extensible):
    """The Messages-API message an assistant line carries."""

    content: list[ContentBlock]
    id: str = ""
    model: str = ""
    role: str = "assistant"
    type: str = "message"
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None


@attrs.frozen
class UserContent(_Extensible):
    """What a user line carries: the prompt's text, or tool results."""

    content: str | list[ContentBlock]
    role: str = "user"


# -- the lines ------------------------------------------------------------------------------------


@attrs.frozen
class SystemInit(_Line):
    """``system`` / ``init``: the session's metadata, at the start of each turn."""

    session_id: str
    model: str = ""
    cwd: str = ""
    tools: list[str] = attrs.field(factory=list)
    mcp_servers: list[JsonObject] = attrs.field(factory=list)
    permission_mode: str = attrs.field(default="", metadata={"wire": "permissionMode"})
    claude_code_version: str = ""
    type: str = "system"
    subtype: str = "init"


@attrs.frozen
class SystemMessage(_Line):
    """Any other ``system`` line: status, compact_boundary, api_retry, ..."""

    subtype: str
    type: str = "system"


@attrs.frozen
class AssistantMessage(_ConversationLine):
    """One completed content block of the model's answer."""

    message: ApiMessage
    error: str | None = None
    type: str = "assistant"


@attrs.frozen
class UserMessage(_ConversationLine):
    """A user-role message the CLI added: tool results, interruption markers, summaries."""

    message: UserContent
    type: str = "user"


@attrs.frozen
class ResultMessage(_Line):
    """The end of a turn."""

    subtype: str
    is_error: bool
    duration_ms: int = 0
    duration_api_ms: int = 0
    num_turns: int = 0
    total_cost_usd: float = 0.0
    usage: JsonObject = attrs.field(factory=dict)
    model_usage: dict[str, JsonObject] = attrs.field(factory=dict, metadata={"wire": "modelUsage"})
    permission_denials: list[JsonObject] = attrs.field(factory=list)
    result: str | None = None
    errors: list[str] | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    type: str = "result"

    @property
    def synthesized(self) -> bool:
        """Made by hive for a turn its agent ended without a result (marked ``"hive": {...}``)."""
        return bool(self.extra.get("hive"))

    @property
    def context_window(self) -> int | None:
        """The largest context window among the models this turn used, if reported."""
        windows = [u.get("contextWindow") for u in self.model_usage.values()]
        sizes = [w for w in windows if isinstance(w, int) and w > 0]
        return max(sizes) if sizes else None


@attrs.frozen
class StreamEvent(_ConversationLine):
    """A raw Messages-API streaming event (with ``--include-partial-messages``)."""

    event: JsonObject
    type: str = "stream_event"


@attrs.frozen
class UnknownMessage:
    """A line of a type not modelled here, kept whole."""

    type: str
    data: JsonObject


StreamMessage = (
    SystemInit | SystemMessage | AssistantMessage | UserMessage | ResultMessage | StreamEvent | UnknownMessage
)


BLOCKS: dict[str, type[TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}
"""The content blocks modelled here, by their ``type`` (a block of any other is an UnknownBlock)."""
LINES: dict[str, type[AssistantMessage | UserMessage | ResultMessage | StreamEvent]] = {
    "assistant": AssistantMessage,
    "user": UserMessage,
    "result": ResultMessage,
    "stream_event": StreamEvent,
}
"""The lines modelled here by their ``type``, but ``system`` ones (SystemInit for the subtype
``init``, SystemMessage for any other); a line of any other type is an UnknownMessage."""
EXTENSIBLE: tuple[type[_Extensible], ...] = (
    *BLOCKS.values(),
    Usage,
    ApiMessage,
    UserContent,
    SystemInit,
    SystemMessage,
    *LINES.values(),
)
"""Every type that keeps the keys it does not name in ``extra`` (a field named otherwise on the
wire says so in its ``metadata["wire"]``; one left off the wire when it is None, in its
``metadata["omit_if_none"]``)."""
