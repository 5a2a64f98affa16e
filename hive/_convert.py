"""The one strict cattrs configuration every package builds its converter from.

cattrs' JSON converter coerces what it is given: ``"no"`` becomes ``True``, ``"5"`` the int 5,
``12`` the string ``"12"``, a string a list of its characters. What hive reads (its records on
disk, the lines on its sockets, an agent's messages) is refused instead when a value has the
wrong JSON type:

- ``bool`` only from ``true`` or ``false``;
- ``int`` only from a JSON integer, never from a boolean;
- ``float`` from a JSON number (an integer is widened), never from a boolean;
- ``str`` only from a string;
- lists and tuples only from arrays; dicts and attrs classes only from objects;
- an enum or a ``Literal`` only from one of its values, of the same JSON type.

:func:`structure` reports every wrong field by its path on the wire (``$.from``,
``$.agents[0].pid``) in one :class:`DecodeError`, a :class:`hive.errors.BadInput`.

Importing this module imports cattrs (tens of milliseconds): a package whose converter is built
on first use imports it there.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from typing import Any, Literal, Protocol, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_mapping,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import JsonConverter, configure_converter

from hive._when import counted
from hive.errors import BadInput

__all__ = [
    "DecodeError",
    "StrictConverter",
    "Unknown",
    "_WrongType",
    "json_type",
    "strict_converter",
    "structure",
]

T = TypeVar("T")
Hook = Callable[[Any, Any], Any]


class DecodeError(BadInput):
    """A JSON value that is not the record it should be; the message names each wrong field."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)
        """Each wrong field as ``<path>: <what is wrong>`` (empty for a message of another kind)."""


class _WrongType(TypeError):
    """Raised inside the converter by a hook that met a value of the wrong JSON type."""


def json_type(value: object) -> str:
    """What ``value`` is, as JSON calls it: ``null``, ``a boolean``, ``an integer``, ..."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names |= {list: "an array", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")


def _got(value: object) -> str:
    if isinstance(value, bool | int | float | str):
        return f"{json_type(value)} ({value!r:.40})"
    return json_type(value)


def _wrong(expected: str, value: object) -> _WrongType:
    return _WrongType(f"expected {expected}, got {_got(value)}")


def _exactly(kind: type, expected: str) -> Hook:
    def structure(value: Any, cls: Any) -> Any:
        if cls is not kind and _is_enum(cls):  # an enum that is also a str or an int
            return _enum(cls)(value, cls)
        if type(value) is not kind:
            raise _wrong(expected, value)
        return value

    return structure


def _float(value: Any, _: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise _WrongType("expected a number, got an integer too large for a float") from None
    raise _wrong("a number", value)


def _only_from(kind: type, expected: str, inner: Hook) -> Hook:
    def structure(value: Any, cls: Any) -> Any:
        if type(value) is not kind:
            raise _wrong(expected, value)
        return inner(value, cls)

    return structure


def _choices(values: Collection[object]) -> str:
    return ", ".join(repr(value) for value in values)


def _literal(cls: Any) -> Hook:
    allowed = get_args(cls)

    def structure(value: Any, _: Any) -> Any:
        if not any(type(value) is type(choice) and value == choice for choice in allowed):
            raise _wrong(f"one of {_choices(allowed)}", value)
        return value

    return structure


def _is_literal(cls: Any) -> bool:
    return get_origin(cls) is Literal


def _is_enum(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, enum.Enum)


def _enum(cls: type[enum.Enum]) -> Hook:
    members = list(cls)

    def structure(value: Any, _: Any) -> enum.Enum:
        for member in members:
            if type(value) is type(member.value) and value == member.value:
                return member
        raise _wrong(f"one of {_choices([m.value for m in members])}", value)

    return structure


class Unknown(Protocol):
    """The variant of a tagged union that holds an object of any other tag whole."""

    def __init__(self, tag: str, data: dict[str, Any], /) -> None: ...

    @property
    def data(self) -> dict[str, Any]:
        """The object, as it was read."""
        ...


class StrictConverter(JsonConverter):
    """A JSON converter with the strict hooks, which knows its classes' fields by their wire names."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wire_names: dict[type, dict[str, str]] = {}
        """For each class whose fields have other names on the wire: attribute -> wire name."""

    def register_fields(
        self,
        cls: type,
        renames: Mapping[str, str] | None = None,
        *,
        omit_if_default: bool | Collection[str] = False,
        keep: Collection[str] = (),
    ) -> None:
        """Structure and unstructure ``cls`` with its fields renamed on the wire (attribute ->
        wire name), leaving out of its JSON the fields at their defaults (``omit_if_default``:
        all of them but those in ``keep``, or just those named)."""
        renames = dict(renames or {})
        every = omit_if_default is True
        named = set() if isinstance(omit_if_default, bool) else set(omit_if_default)
        overrides: dict[str, Any] = {}
        for field in attrs.fields(cls):
            omit = None
            if field.name in named:
                omit = True
            elif every and field.name in keep:
                omit = False
            if field.name in renames or omit is not None:
                overrides[field.name] = override(rename=renames.get(field.name), omit_if_default=omit)
        self.register_structure_hook(
            cls, _only_from(dict, "an object", make_dict_structure_fn(cls, self, **overrides))
        )
        self.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, self, _cattrs_omit_if_default=every, **overrides)
        )
        if renames:
            self.wire_names[cls] = renames

    def register_tagged_union(
        self, union: Any, key: str, classes: Mapping[str, type], unknown: type[Unknown]
    ) -> None:
        """Structure ``union`` by its objects' ``key``: as the class ``classes`` names for its
        value, and any other value as ``unknown(value, object)``, which unstructures back to the
        object it holds."""

        def structure(obj: Any, _: Any) -> Any:
            if not isinstance(obj, dict):
                raise _wrong("an object", obj)
            tag = obj.get(key)
            cls = classes.get(tag) if isinstance(tag, str) else None
            return unknown(str(tag), obj) if cls is None else self.structure(obj, cls)

        self.register_structure_hook(union, structure)
        self.register_unstructure_hook(unknown, lambda value: value.data)

    def paths(self, exc: BaseException, path: str = "$") -> list[str]:
        """What is wrong in a failed structuring, one ``<path>: <problem>`` each."""
        if isinstance(exc, cattrs.ClassValidationError):
            noted, unnoted = exc.group_exceptions()
            names = self.wire_names.get(getattr(exc, "cl", None), {})  # type: ignore[arg-type]
            found = []
            for inner, note in noted:
                found += self.paths(inner, f"{path}.{names.get(note.name, note.name)}")
            return found + [line for inner in unnoted for line in self.paths(inner, path)]
        if isinstance(exc, cattrs.IterableValidationError):
            noted_items, unnoted = exc.group_exceptions()
            found = []
            for inner, item in noted_items:
                found += self.paths(inner, f"{path}[{item.index!r}]")
            return found + [line for inner in unnoted for line in self.paths(inner, path)]
        if isinstance(exc, KeyError):
            return [f"{path}: missing (it is required)"]
        if isinstance(exc, cattrs.ForbiddenExtraKeysError):
            return [
                f"{path}: {counted(len(exc.extra_fields), 'unknown field')}: {', '.join(sorted(exc.extra_fields))}"
            ]
        if isinstance(exc, cattrs.BaseValidationError):
            return [f"{path}: {exc.message}"]
        return [f"{path}: {exc}"]


def strict_converter() -> StrictConverter:
    """A new converter with the strict configuration; a package registers its own hooks on it."""
    made = StrictConverter(unstruct_collection_overrides={Set: list, Counter: dict})
    configure_converter(made)
    made.register_structure_hook(bool, _exactly(bool, "true or false"))
    made.register_structure_hook(int, _exactly(int, "an integer"))
    made.register_structure_hook(float, _float)
    made.register_structure_hook(str, _exactly(str, "a string"))
    made.register_structure_hook_factory(_is_literal, _literal)
    made.register_structure_hook_factory(_is_enum, _enum)

    def sequence(cls: Any, conv: Any) -> Hook:
        build = homogenous_tuple_structure_factory if get_origin(cls) is tuple else list_structure_factory
        return _only_from(list, "an array", build(cls, conv))

    made.register_structure_hook_factory(is_sequence, sequence)
    made.register_structure_hook_factory(
        is_mapping, lambda cls, conv: _only_from(dict, "an object", mapping_structure_factory(cls, conv))
    )
    made.register_structure_hook_factory(
        attrs.has, lambda cls, conv: _only_from(dict, "an object", make_dict_structure_fn(cls, conv))
    )
    return made


def structure(converter: StrictConverter, raw: Any, cls: type[T], what: str | None = None) -> T:
    """``raw`` (parsed JSON) as ``cls``; :class:`DecodeError` naming each wrong field if it is not one.

    ``what`` names the thing in the message (default: the class's name)."""
    try:
        return converter.structure(raw, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError, RecursionError) as exc:
        problems = converter.paths(exc)
        raise DecodeError(f"malformed {what or cls.__name__}: {'; '.join(problems)}", problems) from None
