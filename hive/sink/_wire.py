"""The one cattrs converter for stream-json: typed messages to and from JSON objects.

Keys a type does not name go to its ``extra`` and come back out on unstructuring; block
and message kinds not modelled become UnknownBlock / UnknownMessage holding the object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

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

T = TypeVar("T")


class MessageError(ValueError):
    """A stream-json line that is not a JSON object of the shape its type requires."""


converter = make_converter()


def _passthrough(value: Any, _: Any) -> Any:
    return value


def _with_extra(cls: type[T], renames: Mapping[str, str] | None = None) -> None:
    """Structure ``cls`` keeping unnamed keys in ``extra``; unstructure merging them back."""
    renames = dict(renames or {})
    overrides = {name: override(rename=wire) for name, wire in renames.items()}
    structure_known = make_dict_structure_fn(cls, converter, extra=override(omit=True), **overrides)  # type: ignore[arg-type]
    unstructure_known = make_dict_unstructure_fn(cls, converter, extra=override(omit=True), **overrides)  # type: ignore[arg-type]
    wire_names = frozenset(renames.get(f.name, f.name) for f in attrs.fields(cls) if f.name != "extra")  # type: ignore[arg-type]

    def structure(obj: Any, _: Any) -> T:
        if not isinstance(obj, dict):
            raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(obj).__name__}")
        known = {k: v for k, v in obj.items() if k in wire_names}
        extra = {k: v for k, v in obj.items() if k not in wire_names}
        value = structure_known(known, cls)
        return attrs.evolve(value, extra=extra) if extra else value  # type: ignore[misc]

    def unstructure(value: T) -> JsonObject:
        out = unstructure_known(value)
        extra: JsonObject = value.extra  # type: ignore[attr-defined]
        return {**out, **extra} if extra else out

    converter.register_structure_hook(cls, structure)
    converter.register_unstructure_hook(cls, unstructure)


converter.register_structure_hook(str | list[JsonObject] | None, _passthrough)

_BLOCKS: dict[str, type[TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}


def _structure_block(obj: Any, _: Any) -> ContentBlock:
    if not isinstance(obj, dict):
        raise TypeError(f"expected a content block object, got {type(obj).__name__}")
    kind = obj.get("type")
    cls = _BLOCKS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return UnknownBlock(type=str(kind), data=obj)
    return converter.structure(obj, cls)


def _unstructure_block(block: ContentBlock) -> JsonObject:
    if isinstance(block, UnknownBlock):
        return block.data
    return converter.unstructure(block, type(block))  # type: ignore[no-any-return]


converter.register_structure_hook(ContentBlock, _structure_block)
converter.register_unstructure_hook(ContentBlock, _unstructure_block)
converter.register_unstructure_hook(UnknownBlock, lambda block: block.data)


def _structure_user_content(obj: Any, _: Any) -> str | list[ContentBlock]:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, list):
        return [_structure_block(item, None) for item in obj]
    raise TypeError(f"user content must be a string or a list of blocks, got {type(obj).__name__}")


converter.register_structure_hook(str | list[ContentBlock], _structure_user_content)
converter.register_unstructure_hook(
    str | list[ContentBlock],
    lambda value: value if isinstance(value, str) else [_unstructure_block(b) for b in value],
)

# Registered after the hooks above: a generated hook captures the hooks of its fields' types.
_PLAIN: tuple[type, ...] = (
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    ToolResultBlock,
    Usage,
    ApiMessage,
    UserContent,
    SystemMessage,
    AssistantMessage,
    UserMessage,
    StreamEvent,
)
for _cls in _PLAIN:
    _with_extra(_cls)
_with_extra(SystemInit, {"permission_mode": "permissionMode"})
_with_extra(ResultMessage, {"model_usage": "modelUsage"})

_LINES: dict[str, type[StreamMessage]] = {
    "assistant": AssistantMessage,
    "user": UserMessage,
    "result": ResultMessage,
    "stream_event": StreamEvent,
}


def structure_message(obj: Any) -> StreamMessage:
    """The typed message for one parsed stream-json object (UnknownMessage for other types)."""
    if not isinstance(obj, dict):
        raise MessageError(f"a stream-json line must be a JSON object, not {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "system":
        cls: type[StreamMessage] = SystemInit if obj.get("subtype") == "init" else SystemMessage
    else:
        found = _LINES.get(kind) if isinstance(kind, str) else None
        if found is None:
            return UnknownMessage(type=str(kind), data=obj)
        cls = found
    try:
        return converter.structure(obj, cls)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        raise MessageError(f"malformed {kind} line: {_describe(exc)}") from None


def unstructure_message(message: StreamMessage) -> JsonObject:
    """The message as a JSON object, ``type`` (and ``subtype``) first, as claude writes them."""
    if isinstance(message, UnknownMessage):
        return message.data
    obj: JsonObject = converter.unstructure(message, type(message))
    head: JsonObject = {key: obj[key] for key in ("type", "subtype") if key in obj}
    return {**head, **obj}


def parse_line(line: bytes | str) -> StreamMessage:
    """One stream-json line to its typed message; MessageError if it is not one."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise MessageError(f"not JSON: {str(exc)[:200]}") from None
    return structure_message(obj)


def encode_message(message: StreamMessage | JsonObject) -> bytes:
    """One message as a compact stream-json line, newline included."""
    obj = message if isinstance(message, dict) else unstructure_message(message)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return str(exc)


Encoder = Callable[[StreamMessage | JsonObject], bytes]
