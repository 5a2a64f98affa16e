"""claude's stream-json as hive passes it on: typed messages, raw line batches, and sinks.

Each name is imported from its module on first use, so that a part of hive that needs only
``ContextUsage`` (the runtime's configuration, read before an agent is spawned) does not pay
for the message classes or Trio.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "ApiMessage",
    "AssistantMessage",
    "Batch",
    "ContentBlock",
    "ContextUsage",
    "Dropped",
    "FanOut",
    "JsonObject",
    "JsonlFile",
    "JsonlSink",
    "LineFramer",
    "MemorySink",
    "MessageError",
    "ResultMessage",
    "SessionCost",
    "Sink",
    "StreamEvent",
    "StreamMessage",
    "SystemInit",
    "SystemMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "TurnCost",
    "UnknownBlock",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "converter",
    "encode_message",
    "first_message",
    "last_message",
    "structured",
    "typed_lines",
    "parse_line",
    "structure_message",
    "unstructure_message",
]

if TYPE_CHECKING:
    from hive.sink._batch import (
        Batch,
        Dropped,
        LineFramer,
        first_message,
        last_message,
        structured,
        typed_lines,
    )
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
    from hive.sink._sink import FanOut, JsonlFile, JsonlSink, MemorySink, Sink
    from hive.sink._stream_json import (
        MessageError,
        converter,
        encode_message,
        parse_line,
        structure_message,
        unstructure_message,
    )
    from hive.sink._usage import ContextUsage, SessionCost, TurnCost

export_lazily(__name__)
