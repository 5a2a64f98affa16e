"""stream-json's typed messages to and from JSON objects: one cattrs converter, and a shortcut.

Keys a type does not name go to its ``extra`` and come back out on unstructuring; block
and message kinds not modelled become UnknownBlock / UnknownMessage holding the object.

The converter (``converter``) is the reference, and it is built on first use: importing
cattrs and generating its hooks costs more than a claude turn's own work in hive (which passes
lines on unparsed and reads two or three of them), and each class's hooks are generated when
that class is first met. Structuring tries a shortcut first: an object whose every field already
has exactly the type the converter would make of it (as claude writes them) is built directly,
which gives what the converter gives; anything else (a missing field, a value to coerce, one
that is wrong) goes to the converter, hive's strict one (``hive._convert``): it coerces
nothing, and says which field is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from hive._lazy import build_on_first_use
from hive.errors import HiveError
from hive.sink._messages import (
    BLOCKS,
    EXTENSIBLE,
    LINES,
    ApiMessage,
    ContentBlock,
    JsonObject,
    StreamMessage,
    SystemInit,
    SystemMessage,
    UnknownBlock,
    UnknownMessage,
    Usage,
    UserContent,
)

if TYPE_CHECKING:
    from hive._convert import StrictConverter

    converter: StrictConverter

T = TypeVar("T")


class MessageError(HiveError, ValueError):
    """A stream-json line that is not a JSON object of the shape its type requires (the sink's one
    error, the root of its family)."""


_RENAMES: dict[type, dict[str, str]] = {
    cls: {field.name: field.metadata["wire"] for field in attrs.fields(cls) if "wire" in field.metadata}
    for cls in EXTENSIBLE
}
"""Every class structured keeping unnamed keys in ``extra``, with its fields named otherwise on the wire."""

_OMITTED_IF_NONE: dict[type, frozenset[str]] = {
    cls: frozenset(field.name for field in attrs.fields(cls) if field.metadata.get("omit_if_none"))
    for cls in EXTENSIBLE
}
"""The fields of each such class that are left off the wire when they are None."""


# -- the converter --------------------------------------------------------------------------------


@cache
def _converter() -> StrictConverter:
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    from hive._convert import strict_converter

    made = strict_converter()

    def passthrough(value: Any, _: Any) -> Any:
        return value

    def structure_hook(cls: type[T]) -> Callable[[Any, Any], T]:
        """Structure ``cls`` keeping unnamed keys in ``extra``."""
        renames = _RENAMES[cls]
        if renames:
            made.wire_names[cls] = renames
        overrides = {name: override(rename=wire) for name, wire in renames.items()}
        structure_known = make_dict_structure_fn(cls, made, extra=override(omit=True), **overrides)  # type: ignore[arg-type]
        wire_names = frozenset(renames.get(f.name, f.name) for f in attrs.fields(cls) if f.name != "extra")  # type: ignore[arg-type]

        def structure(obj: Any, _: Any) -> T:
            if not isinstance(obj, dict):
                raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(obj).__name__}")
            known = {k: v for k, v in obj.items() if k in wire_names}
            extra = {k: v for k, v in obj.items() if k not in wire_names}
            value = structure_known(known, cls)
            return attrs.evolve(value, extra=extra) if extra else value  # type: ignore[misc]

        return structure

    def unstructure_hook(cls: type[T]) -> Callable[[T], JsonObject]:
        """Unstructure ``cls`` merging ``extra`` back in."""
        renames, omitted = _RENAMES[cls], _OMITTED_IF_NONE[cls]
        overrides = {
            name: override(rename=renames.get(name), omit_if_default=True if name in omitted else None)
            for name in renames.keys() | omitted
        }
        unstructure_known = make_dict_unstructure_fn(cls, made, extra=override(omit=True), **overrides)  # type: ignore[arg-type]

        def unstructure(value: T) -> JsonObject:
            out = unstructure_known(value)
            extra: JsonObject = value.extra  # type: ignore[attr-defined]
            return {**out, **extra} if extra else out

        return unstructure

    def unstructure_block(block: ContentBlock) -> JsonObject:
        if isinstance(block, UnknownBlock):
            return block.data
        return made.unstructure(block, type(block))  # type: ignore[no-any-return]

    def structure_user_content(obj: Any, _: Any) -> str | list[ContentBlock]:
        if isinstance(obj, str):
            return obj
        if isinstance(obj, list):
            return [made.structure(item, ContentBlock) for item in obj]  # type: ignore[arg-type]
        raise TypeError(f"user content must be a string or a list of blocks, got {type(obj).__name__}")

    made.register_structure_hook(str | list[JsonObject] | None, passthrough)
    made.register_tagged_union(ContentBlock, "type", BLOCKS, UnknownBlock)
    made.register_unstructure_hook(ContentBlock, unstructure_block)
    made.register_structure_hook(str | list[ContentBlock], structure_user_content)
    made.register_unstructure_hook(
        str | list[ContentBlock],
        lambda value: value if isinstance(value, str) else [unstructure_block(b) for b in value],
    )
    # A class's hooks are generated when it is first structured or unstructured, after every
    # hook above is in place (a generated hook captures the hooks of its fields' types).
    made.register_structure_hook_factory(lambda cls: cls in _RENAMES, structure_hook)
    made.register_unstructure_hook_factory(lambda cls: cls in _RENAMES, unstructure_hook)
    return made


build_on_first_use(__name__, converter=_converter)


# -- the shortcut ---------------------------------------------------------------------------------


class _Slow(Exception):
    """The shortcut cannot build this exactly as the converter would: the converter decides."""


Build = Callable[[Any], Any]


def _exactly(kind: type) -> Build:
    def build(value: Any) -> Any:
        if type(value) is kind:
            return value
        raise _Slow

    return build


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)  # as the converter does
        except OverflowError:
            raise _Slow from None
    raise _Slow


def _optional(build: Build) -> Build:
    def optional(value: Any) -> Any:
        return None if value is None else build(value)

    return optional


def _object(value: Any) -> JsonObject:
    if type(value) is dict and all(type(key) is str for key in value):
        return dict(value)
    raise _Slow


def _list_of(build: Build) -> Build:
    def list_of(value: Any) -> list[Any]:
        if type(value) is list:
            return [build(item) for item in value]
        raise _Slow

    return list_of


def _objects_by_name(value: Any) -> dict[str, JsonObject]:
    if type(value) is dict:
        return {key: _object(item) for key, item in _object(value).items()}
    raise _Slow


def _text_or_objects(value: Any) -> str | list[JsonObject] | None:
    if value is None or type(value) is str:
        return value
    return _list_of(_object)(value)  # type: ignore[no-any-return]


def _block(value: Any) -> ContentBlock:
    if not isinstance(value, dict):
        raise _Slow
    kind = value.get("type")
    cls = BLOCKS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return UnknownBlock(type=str(kind), data=value)
    return _build(cls, value)


def _user_content(value: Any) -> str | list[ContentBlock]:
    if type(value) is str:
        return value
    return _list_of(_block)(value)  # type: ignore[no-any-return]


def _nested(cls: type) -> Build:
    return lambda value: _build(cls, value)


# The fields' annotations, as written in _messages (a class with any other is always left to
# the converter; a test checks that none is).
_BUILDS: dict[str, Build] = {
    "str": _exactly(str),
    "int": _exactly(int),
    "bool": _exactly(bool),
    "float": _float,
    "str | None": _optional(_exactly(str)),
    "bool | None": _optional(_exactly(bool)),
    "JsonObject": _object,
    "list[str]": _list_of(_exactly(str)),
    "list[str] | None": _optional(_list_of(_exactly(str))),
    "list[JsonObject]": _list_of(_object),
    "dict[str, JsonObject]": _objects_by_name,
    "str | list[JsonObject] | None": _text_or_objects,
    "list[ContentBlock]": _list_of(_block),
    "str | list[ContentBlock]": _user_content,
    "Usage | None": _optional(_nested(Usage)),
    "ApiMessage": _nested(ApiMessage),
    "UserContent": _nested(UserContent),
}


Plan = tuple[dict[str, tuple[str, Build]], frozenset[str]]
"""A class's fields by their wire names (each with its name and how its value is built), and
the names of those it requires."""


def written_annotations(cls: type) -> dict[str, str]:
    """The annotations of ``cls``'s fields, its bases' too, as written in _messages (a field's
    ``.type`` may have been resolved by the converter)."""
    annotations: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        annotations |= vars(klass).get("__annotations__", {})
    return annotations


def _plan(cls: type, renames: Mapping[str, str]) -> Plan | None:
    fields: dict[str, tuple[str, Build]] = {}
    required = set()
    annotations = written_annotations(cls)
    for field in attrs.fields(cls):
        if field.name == "extra":
            continue
        build = _BUILDS.get(annotations.get(field.name, ""))
        if build is None:
            return None
        fields[renames.get(field.name, field.name)] = (field.name, build)
        if field.default is attrs.NOTHING:
            required.add(field.name)
    return fields, frozenset(required)


_PLANS: dict[type, Plan | None] = {cls: _plan(cls, renames) for cls, renames in _RENAMES.items()}


def _build(cls: type[T], obj: Any) -> T:
    """``obj`` as ``cls``, the converter's way, if every value has exactly its type; else _Slow."""
    plan = _PLANS[cls]
    if plan is None or type(obj) is not dict:
        raise _Slow
    fields, required = plan
    known: dict[str, Any] = {}
    extra: JsonObject = {}
    for key, value in obj.items():
        field = fields.get(key)
        if field is None:
            extra[key] = value
        else:
            known[field[0]] = field[1](value)
    if not required <= known.keys():
        raise _Slow
    make: Callable[..., T] = cls
    return make(**known, extra=extra)


# -- the messages ---------------------------------------------------------------------------------


def structure_message(obj: Any) -> StreamMessage:
    """The typed message for one parsed stream-json object (UnknownMessage for other types)."""
    if not isinstance(obj, dict):
        raise MessageError(f"a stream-json line must be a JSON object, not {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "system":
        cls: type[StreamMessage] = SystemInit if obj.get("subtype") == "init" else SystemMessage
    else:
        found = LINES.get(kind) if isinstance(kind, str) else None
        if found is None:
            return UnknownMessage(type=str(kind), data=obj)
        cls = found
    try:
        return _build(cls, obj)
    except _Slow:
        pass
    from hive._convert import DecodeError, structure

    try:
        return structure(_converter(), obj, cls, f"{kind} line")
    except DecodeError as exc:
        raise MessageError(str(exc)) from None


def unstructure_message(message: StreamMessage) -> JsonObject:
    """The message as a JSON object, ``type`` (and ``subtype``) first, as claude writes them."""
    if isinstance(message, UnknownMessage):
        return message.data
    obj: JsonObject = _converter().unstructure(message, type(message))
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


Encoder = Callable[[StreamMessage | JsonObject], bytes]
