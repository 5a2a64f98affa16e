"""The part of ACP (protocol version 1) hive uses, as attrs types with one cattrs converter.

Fields are snake_case here and camelCase on the wire. Unknown fields are ignored, unknown
``sessionUpdate`` kinds become UnknownUpdate, and optional fields left at their defaults
are not sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

import attrs

from hive.acp._errors import AcpError

if TYPE_CHECKING:
    from hive._convert import StrictConverter

PROTOCOL_VERSION = 1
JsonObject = dict[str, Any]


class SchemaError(AcpError, ValueError):
    """A message from the agent does not have the shape ACP requires."""


# -- initialize ---------------------------------------------------------------------------------


@attrs.frozen
class Implementation:
    name: str
    version: str = ""
    title: str | None = None


@attrs.frozen
class FsCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False


@attrs.frozen
class ClientCapabilities:
    fs: FsCapabilities = attrs.field(factory=FsCapabilities)
    terminal: bool = False


@attrs.frozen
class InitializeRequest:
    protocol_version: int
    client_capabilities: ClientCapabilities
    client_info: Implementation


@attrs.frozen
class McpCapabilities:
    http: bool = False
    sse: bool = False


@attrs.frozen
class AgentCapabilities:
    load_session: bool = False
    mcp_capabilities: McpCapabilities = attrs.field(factory=McpCapabilities)
    prompt_capabilities: JsonObject = attrs.field(factory=dict)
    session_capabilities: JsonObject = attrs.field(factory=dict)


@attrs.frozen
class InitializeResponse:
    protocol_version: int
    agent_capabilities: AgentCapabilities = attrs.field(factory=AgentCapabilities)
    agent_info: Implementation | None = None
    auth_methods: list[JsonObject] = attrs.field(factory=list)


# -- sessions -----------------------------------------------------------------------------------


@attrs.frozen
class EnvVariable:
    name: str
    value: str


@attrs.frozen
class HttpHeader:
    name: str
    value: str


@attrs.frozen
class McpServerStdio:
    """The stdio variant has no ``type`` on the wire."""

    name: str
    command: str
    args: list[str]
    env: list[EnvVariable]


@attrs.frozen
class McpServerHttp:
    name: str
    url: str
    headers: list[HttpHeader]
    type: str = "http"


McpServer = McpServerStdio | McpServerHttp


@attrs.frozen
class ConfigOption:
    """A session config option; only ``select`` options are set by hive."""

    id: str
    name: str = ""
    type: str = "select"
    category: str | None = None
    current_value: Any = None
    options: list[JsonObject] = attrs.field(factory=list)

    def values(self) -> list[str]:
        """The values on offer, flattening groups."""
        return list(_values(self.options))


def _values(options: list[JsonObject]) -> Iterator[str]:
    for option in options:
        if isinstance(option.get("options"), list):
            yield from _values(option["options"])
        elif isinstance(option.get("value"), str):
            yield option["value"]


@attrs.frozen
class NewSessionRequest:
    cwd: str
    mcp_servers: list[McpServer]


@attrs.frozen
class NewSessionResponse:
    session_id: str
    config_options: list[ConfigOption] | None = None
    modes: JsonObject | None = None


@attrs.frozen
class LoadSessionRequest:
    session_id: str
    cwd: str
    mcp_servers: list[McpServer]


@attrs.frozen
class LoadSessionResponse:
    config_options: list[ConfigOption] | None = None
    modes: JsonObject | None = None


@attrs.frozen
class TextContent:
    text: str
    type: str = "text"


@attrs.frozen
class PromptRequest:
    session_id: str
    prompt: list[TextContent]


@attrs.frozen
class PromptResponse:
    stop_reason: str
    usage: JsonObject | None = None


@attrs.frozen
class CancelNotification:
    session_id: str


@attrs.frozen
class SetConfigOptionRequest:
    session_id: str
    config_id: str
    value: str


@attrs.frozen
class SetConfigOptionResponse:
    config_options: list[ConfigOption] = attrs.field(factory=list)


# -- permission ---------------------------------------------------------------------------------


@attrs.frozen
class PermissionOption:
    option_id: str
    name: str = ""
    kind: str = ""


@attrs.frozen
class RequestPermissionRequest:
    session_id: str
    tool_call: JsonObject
    options: list[PermissionOption]


@attrs.frozen
class SelectedOutcome:
    option_id: str
    outcome: str = "selected"


@attrs.frozen
class CancelledOutcome:
    outcome: str = "cancelled"


@attrs.frozen
class RequestPermissionResponse:
    outcome: SelectedOutcome | CancelledOutcome


# -- session/update -----------------------------------------------------------------------------


@attrs.frozen
class MessageChunk:
    """``agent_message_chunk``, ``agent_thought_chunk`` and ``user_message_chunk``."""

    session_update: str
    content: JsonObject
    message_id: str | None = None

    @property
    def text(self) -> str:
        text = self.content.get("text")
        return text if self.content.get("type") == "text" and isinstance(text, str) else ""


@attrs.frozen
class ToolCall:
    """``tool_call`` and ``tool_call_update`` (on an update every field but the id may be absent)."""

    session_update: str
    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[JsonObject] | None = None
    locations: list[JsonObject] | None = None
    raw_input: Any = None
    raw_output: Any = None
    meta: JsonObject | None = None


@attrs.frozen
class AvailableCommand:
    name: str
    description: str = ""


@attrs.frozen
class AvailableCommandsUpdate:
    session_update: str
    available_commands: list[AvailableCommand]


@attrs.frozen
class ConfigOptionUpdate:
    session_update: str
    config_options: list[ConfigOption]


@attrs.frozen
class UsageUpdate:
    session_update: str
    used: int
    size: int
    cost: JsonObject | None = None


@attrs.frozen
class UnknownUpdate:
    """An update of a kind hive does not act on (plan, modes, session info, unknown kinds)."""

    session_update: str
    data: JsonObject


SessionUpdate = (
    MessageChunk | ToolCall | AvailableCommandsUpdate | ConfigOptionUpdate | UsageUpdate | UnknownUpdate
)

_UPDATES: dict[str, type[Any]] = {
    "agent_message_chunk": MessageChunk,
    "agent_thought_chunk": MessageChunk,
    "user_message_chunk": MessageChunk,
    "tool_call": ToolCall,
    "tool_call_update": ToolCall,
    "available_commands_update": AvailableCommandsUpdate,
    "config_option_update": ConfigOptionUpdate,
    "usage_update": UsageUpdate,
}


@attrs.frozen
class SessionNotification:
    session_id: str
    update: SessionUpdate


# -- the converter ------------------------------------------------------------------------------
# Built on first use, not at import: importing cattrs and generating ~35 classes' hooks takes
# ~45 ms, which `hive run` then spends after the agent is spawned, while the agent starts, rather
# than before.

_SNAKE = re.compile(r"_([a-z])")


def camel(name: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), name)


_ALWAYS = frozenset({"type", "outcome", "session_update"})
"""Discriminators: sent even when they hold their default."""

_CLASSES = (
    Implementation,
    FsCapabilities,
    ClientCapabilities,
    InitializeRequest,
    McpCapabilities,
    AgentCapabilities,
    InitializeResponse,
    EnvVariable,
    HttpHeader,
    McpServerStdio,
    McpServerHttp,
    ConfigOption,
    NewSessionRequest,
    NewSessionResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    TextContent,
    PromptRequest,
    PromptResponse,
    CancelNotification,
    SetConfigOptionRequest,
    SetConfigOptionResponse,
    PermissionOption,
    RequestPermissionRequest,
    SelectedOutcome,
    CancelledOutcome,
    RequestPermissionResponse,
    MessageChunk,
    ToolCall,
    AvailableCommand,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    UsageUpdate,
    SessionNotification,
)


@cache
def converter() -> StrictConverter:
    """The one converter of ACP's types (hive's strict one), built the first time a message is sent or read."""
    from cattrs.gen import make_dict_unstructure_fn

    from hive._convert import strict_converter

    conv = strict_converter()

    def register(cls: type) -> None:
        wire = {
            field.name: "_meta" if field.name == "meta" else camel(field.name) for field in attrs.fields(cls)
        }
        conv.register_fields(cls, wire, omit_if_default=True, keep=_ALWAYS)

    def structure_mcp_server(obj: Any, _: Any) -> McpServer:
        if isinstance(obj, dict) and obj.get("type") == "http":
            return conv.structure(obj, McpServerHttp)
        return conv.structure(obj, McpServerStdio)

    def structure_outcome(obj: Any, _: Any) -> SelectedOutcome | CancelledOutcome:
        if isinstance(obj, dict) and obj.get("outcome") == "selected":
            return conv.structure(obj, SelectedOutcome)
        return CancelledOutcome()

    # Hooks for unions first: a generated hook captures the hooks of its fields' types.
    conv.register_tagged_union(SessionUpdate, "sessionUpdate", _UPDATES, UnknownUpdate)
    conv.register_structure_hook(McpServer, structure_mcp_server)
    conv.register_structure_hook(SelectedOutcome | CancelledOutcome, structure_outcome)
    for cls in _CLASSES:
        register(cls)
    # The stdio variant must send its (possibly empty) lists: they are required on the wire.
    conv.register_unstructure_hook(McpServerStdio, make_dict_unstructure_fn(McpServerStdio, conv))
    return conv


def to_wire(value: Any) -> Any:
    return converter().unstructure(value)


_CHUNKS = frozenset(("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"))
_CHUNK_KEYS = frozenset(("sessionUpdate", "content", "messageId"))


def message_chunk(obj: Any) -> SessionNotification | None:
    """A ``session/update`` that is a message chunk, the stream's overwhelmingly common line,
    structured as the converter would structure it, without it (1.2 of its 2.9 µs: bench 7);
    None for anything else, or anything off, which the converter then takes and names."""
    if type(obj) is not dict or len(obj) != 2:
        return None
    session, update = obj.get("sessionId"), obj.get("update")
    if type(session) is not str or type(update) is not dict or not update.keys() <= _CHUNK_KEYS:
        return None
    kind, content, message_id = update.get("sessionUpdate"), update.get("content"), update.get("messageId")
    if (
        type(kind) is not str
        or kind not in _CHUNKS
        or type(content) is not dict
        or not (message_id is None or type(message_id) is str)
    ):
        return None
    if not all(type(key) is str for key in content):
        return None
    return SessionNotification(session, MessageChunk(kind, content, message_id))


def from_wire(obj: Any, cls: type[Any]) -> Any:
    """Structure an agent's message; SchemaError (saying what is wrong) if it cannot be."""
    if cls is SessionNotification and (chunk := message_chunk(obj)) is not None:
        return chunk
    if obj is None and cls in (LoadSessionResponse, SetConfigOptionResponse):
        obj = {}
    conv = converter()
    try:
        return conv.structure(obj, cls)
    except Exception:  # told below, where structuring it again names each problem
        pass
    from hive._convert import DecodeError, structure

    try:
        return structure(conv, obj, cls)
    except DecodeError as exc:
        problems = "; ".join(exc.problems)
        raise SchemaError(f"the agent's {cls.__name__} is malformed: {problems}") from None
