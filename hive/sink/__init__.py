"""claude's stream-json as hive passes it on: typed messages, raw line batches, and sinks."""

from typing import TYPE_CHECKING, Any

from hive.sink._batch import Batch, Dropped, LineFramer, first_message, last_message
from hive.sink._messages import (
    ApiMessage,
    AssistantMessage,
    ContentBlock,
    JsonObject,
    ResultMessage,
    StreamEvent,
    StreamMessage,
    SystemInit,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
)
from hive.sink._sink import ContextUsage, FanOut, JsonlSink, MemorySink, Sink
from hive.sink._wire import (
    MessageError,
    encode_message,
    parse_line,
    structure_message,
    unstructure_message,
)

if TYPE_CHECKING:
    from hive.sink._wire import converter

__all__ = [
    "ApiMessage",
    "AssistantMessage",
    "Batch",
    "ContentBlock",
    "ContextUsage",
    "Dropped",
    "FanOut",
    "JsonObject",
    "JsonlSink",
    "LineFramer",
    "MemorySink",
    "MessageError",
    "ResultMessage",
    "Sink",
    "StreamEvent",
    "StreamMessage",
    "SystemInit",
    "SystemMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UnknownBlock",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "converter",
    "encode_message",
    "first_message",
    "last_message",
    "parse_line",
    "structure_message",
    "unstructure_message",
]


def __getattr__(name: str) -> Any:
    # The cattrs converter is built on first use (see _wire).
    if name == "converter":
        from hive.sink import _wire

        return _wire.converter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
