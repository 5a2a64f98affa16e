"""The one policy for an MCP tool's arguments, driven by the JSON Schema the tool lists, and the
one shape of its structured answer (:func:`answer_schema`).

Every tool of hive (bash, subagent, hyperhive) checks its arguments here, against the
``inputSchema`` it declares in ``tools/list``, before it does anything:

- ``arguments`` itself must be an object (left out or ``null``: none given); a string, an
  array, a number or a boolean is refused as such (:func:`arguments_object`), also where the
  MCP SDK would refuse the call with a bare ``-32602`` (the kit's server asks here first);
- an argument the schema does not name is refused, naming it and those the tool takes;
- ``null`` counts as leaving an argument out (a required one is then missing);
- a ``number`` is a JSON number, or a string holding one (``"5"``: the bash tools have always
  taken these, and their tests promise it, so every tool does); a boolean never counts as one;
  an ``integer`` is a whole number (``5``, ``5.0`` or ``"5"``); a number must be finite;
- a value out of the schema's range (``minimum``, ``maximum``, ``exclusiveMinimum``, ...),
  of the wrong length, off its ``pattern`` or not in its ``enum`` is refused naming the range;
  an argument the caller names in ``capped`` is taken at its cap instead when it is larger;
- every message names the argument and what it expects.

:func:`check_arguments` returns the arguments given (numbers as numbers), with the schema's
defaults for those left out. Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from hive._limits import NAME_RULE, NAME_SCHEMA_PATTERN
from hive._when import counted
from hive.errors import BadInput

__all__ = ["ArgumentError", "answer_schema", "arguments_object", "check_arguments"]

_WHOLE = re.compile(r"[+-]?[0-9]+")
_PATTERN_RULES = {NAME_SCHEMA_PATTERN: f"use {NAME_RULE}"}
"""Patterns a message says in words."""


class ArgumentError(BadInput):
    """A tool was called with arguments its schema refuses; the message names the argument and
    what it expects."""


def check_arguments(
    schema: Mapping[str, Any],
    arguments: object,
    *,
    capped: Mapping[str, float] | None = None,
    ignored: Collection[str] = (),
) -> dict[str, Any]:
    """``arguments`` checked against ``schema`` (an object's JSON Schema), with its defaults filled in.

    ``capped`` maps arguments to the largest value they take: a larger one is taken as that
    (the schema's own ``maximum`` is not enforced for them). ``ignored`` names arguments still
    accepted, and dropped, though the schema no longer lists them.
    Raises :class:`ArgumentError` saying what is wrong."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    given = dict(arguments_object(schema, arguments))
    unknown = sorted(set(given) - set(properties) - set(ignored))
    if unknown:
        raise ArgumentError(
            f"{counted(len(unknown), 'unknown argument')}: {', '.join(unknown)}; this tool takes {_takes(schema)}"
        )
    required = set(schema.get("required", ()))
    caps = capped or {}
    checked: dict[str, Any] = {}
    for key, spec in properties.items():
        value = given.get(key)
        if value is None:
            if key in required:
                raise ArgumentError(f"{key} is required: give {_expected(spec, caps.get(key))}")
            if "default" in spec:
                checked[key] = spec["default"]
            continue
        checked[key] = _check(key, spec, value, caps.get(key), required=key in required)
    return checked


def arguments_object(schema: Mapping[str, Any], arguments: object) -> Mapping[str, Any]:
    """``arguments`` as a tool call's object of named arguments (left out or null: none); an
    `ArgumentError` for anything else (a string, an array, a number, a boolean)."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return arguments
    raise ArgumentError(
        f"arguments must be an object naming each argument, not {_kind_of(arguments)}; "
        f"this tool takes {_takes(schema)}"
    )


def _takes(schema: Mapping[str, Any]) -> str:
    properties: Mapping[str, Any] = schema.get("properties", {})
    return ", ".join(properties) if properties else "no arguments"


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


def file_schema(what: str) -> dict[str, Any]:
    """The schema of a field that gives the path of the file holding ``what`` (whole)."""
    return {"type": "string", "description": f"The file that holds {what}."}


def answer_schema(properties: Mapping[str, Any], *shapes: list[str], errors: str) -> dict[str, Any]:
    """The output schema of a tool's structured answer: an object that always has ``message``
    (the text answer's guidance, for a client that shows the model only the structured content)
    and either ``error`` (a tool error; ``errors`` lists its kinds) or every field of one of
    ``shapes``; ``properties`` describes the tool's own fields."""
    return {
        "type": "object",
        "properties": {
            **properties,
            "message": {
                "type": "string",
                "description": "What the text answer tells you: what happened, and what to do next.",
            },
            "error": {
                "type": "string",
                "description": f"Only on a tool error: its kind ({errors}); `message` says what was wrong "
                "and what to do.",
            },
        },
        "required": ["message"],
        "anyOf": [{"required": ["error"]}, *({"required": shape} for shape in shapes)],
    }


def _types(spec: Mapping[str, Any]) -> list[str]:
    kinds = spec.get("type", [])
    return [kind for kind in ([kinds] if isinstance(kinds, str) else kinds) if kind != "null"]


def _check(key: str, spec: Mapping[str, Any], value: object, cap: float | None, *, required: bool) -> Any:
    kinds = _types(spec)
    if "enum" in spec:
        choices = [choice for choice in spec["enum"] if choice is not None]
        if not any(type(value) is type(choice) and value == choice for choice in choices):
            raise ArgumentError(f"{key} must be {_one_of(choices)}, not {_shown(value)}")
        return value
    for kind in kinds:
        if kind in ("number", "integer"):
            whole = kind == "integer"
            number = _number(value, whole=whole)
            if number is not None:
                _check_range(key, spec, number, cap)
                taken = number if cap is None else min(number, cap)
                return int(taken) if whole else float(taken)
        elif kind == "string" and isinstance(value, str):
            return _string(key, spec, value)
        elif _is(kind, value):
            return value
    if kinds:
        must = (
            f"is required and must be {_expected(spec, cap)}"
            if required
            else f"must be {_expected(spec, cap)}"
        )
        raise ArgumentError(f"{key} {must}, not {_shown(value)}")
    return value


def _is(kind: str, value: object) -> bool:
    json_types: dict[str, type | tuple[type, ...]] = {"boolean": bool, "object": dict, "array": list}
    wanted = json_types.get(kind)
    return wanted is not None and isinstance(value, wanted)


def _number(value: object, *, whole: bool) -> float | int | None:
    """``value`` as a number (from a JSON number, or a string holding one); None if it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if whole and _WHOLE.fullmatch(text) else float(text)
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    if whole and isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def _check_range(key: str, spec: Mapping[str, Any], number: float, cap: float | None) -> None:
    if not math.isfinite(number):
        raise ArgumentError(f"{key} must be a finite number, not {number!r}")
    low, high = spec.get("minimum"), None if cap is not None else spec.get("maximum")
    above, below = spec.get("exclusiveMinimum"), spec.get("exclusiveMaximum")
    if (
        (low is not None and number < low)
        or (high is not None and number > high)
        or (above is not None and number <= above)
        or (below is not None and number >= below)
    ):
        floor = max(bound for bound in (low, above, 0) if bound is not None)
        negative = " (it must not be negative)" if number < 0 <= floor else ""
        raise ArgumentError(f"{key} must be {_expected(spec, cap)}, not {number:g}{negative}")


def _string(key: str, spec: Mapping[str, Any], value: str) -> str:
    shortest, longest = spec.get("minLength"), spec.get("maxLength")
    if shortest is not None and len(value) < shortest:
        empty = "is empty" if not value else f"is {counted(len(value), 'character')} long"
        raise ArgumentError(f"{key} {empty}: it must be {_expected(spec, None)}")
    if longest is not None and len(value) > longest:
        raise ArgumentError(
            f"{key} is {counted(len(value), 'character')} long: it must be {_expected(spec, None)}"
        )
    pattern = spec.get("pattern")
    if pattern is not None and not _matches(pattern, value):
        rule = _PATTERN_RULES.get(pattern, f"it must match {pattern}")
        raise ArgumentError(f"bad {key} {value!r:.80}: {rule}")
    return value


def _matches(pattern: str, value: str) -> bool:
    # JSON Schema's `$` is the end of the text; Python's also matches before a final newline.
    if pattern.startswith("^") and pattern.endswith("$"):
        return re.fullmatch(pattern[1:-1], value) is not None
    return re.search(pattern, value) is not None


def _expected(spec: Mapping[str, Any], cap: float | None) -> str:
    """What an argument of ``spec`` takes, in words: ``a number from 0 to 30``."""
    if "enum" in spec:
        return _one_of([choice for choice in spec["enum"] if choice is not None])
    words = {
        "string": "a string",
        "number": "a number",
        "integer": "a whole number",
        "boolean": "true or false",
        "object": "an object",
        "array": "an array",
    }
    kinds = _types(spec)
    what = " or ".join(words.get(kind, kind) for kind in kinds) or "any value"
    if kinds == ["string"]:
        shortest, longest = spec.get("minLength"), spec.get("maxLength")
        if shortest is not None and longest is not None:
            what += f" of {shortest} to {longest} characters"
        elif shortest is not None:
            what += f" of at least {counted(shortest, 'character')}"
        elif longest is not None:
            what += f" of at most {longest} characters"
    bounds = _bounds(spec, cap)
    return f"{what}, {bounds}" if bounds else what


def _bounds(spec: Mapping[str, Any], cap: float | None) -> str:
    low, high = spec.get("minimum"), spec.get("maximum")
    above, below = spec.get("exclusiveMinimum"), spec.get("exclusiveMaximum")
    if cap is not None:
        high = None
    parts = []
    if low is not None and high is not None:
        parts.append(f"from {low:g} to {high:g}")
    elif low is not None:
        parts.append(f"{low:g} or more")
    elif high is not None:
        parts.append(f"at most {high:g}")
    if above is not None:
        parts.append(f"more than {above:g}")
    if below is not None:
        parts.append(f"less than {below:g}")
    if cap is not None:
        parts.append(f"(more counts as {cap:g})")
    return " ".join(parts)


def _one_of(choices: list[Any]) -> str:
    shown = [repr(choice) for choice in choices]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _shown(value: object) -> str:
    if isinstance(value, bool | int | float | str):
        return f"{value!r:.80}"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else type(value).__name__
