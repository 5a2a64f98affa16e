"""hive.sink's structuring shortcut gives exactly what its cattrs converter gives, or stands aside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from hive.sink import ApiMessage, Usage, UserContent, converter, unstructure_message
from hive.sink._wire import _BLOCKS, _PLANS, _RENAMES, _build, _Slow
from tests.helpers.strategies import json_values, stream_messages

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples"


def shortcut(obj: Any, cls: type) -> Any:
    try:
        return _build(cls, obj)
    except _Slow:
        return None


def test_every_class_has_a_shortcut() -> None:
    assert all(plan is not None for plan in _PLANS.values()), [c for c, p in _PLANS.items() if p is None]


def test_every_real_line_takes_the_shortcut_and_gets_what_the_converter_gives() -> None:
    kinds = {"assistant", "user", "result", "stream_event", "system"}
    checked = 0
    for path in sorted(SAMPLES.glob("*.jsonl")):
        if "transcript" in path.name:
            continue
        for line in path.read_bytes().splitlines():
            obj = json.loads(line) if line.strip() else None
            if not isinstance(obj, dict) or obj.get("type") not in kinds:
                continue
            cls = converter_class(obj)
            fast = shortcut(obj, cls)
            assert fast is not None, line[:200]
            assert repr(fast) == repr(converter.structure(obj, cls))
            checked += 1
    assert checked > 50


def converter_class(obj: dict[str, Any]) -> type:
    from hive.sink._wire import _LINES, SystemInit, SystemMessage

    if obj["type"] == "system":
        return SystemInit if obj.get("subtype") == "init" else SystemMessage
    return _LINES[obj["type"]]


@given(stream_messages)
def test_well_typed_messages_take_the_shortcut(message: Any) -> None:
    obj = unstructure_message(message)
    if type(message) in _PLANS:
        fast = shortcut(obj, type(message))
        assert fast is not None
        assert repr(fast) == repr(converter.structure(obj, type(message)))


json_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
block_objects = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "tool_use", "tool_result", "image"])}
    ),
    st.deferred(lambda: objects_of(st.sampled_from(sorted(_BLOCKS.values(), key=lambda c: c.__name__)))),
)
TYPED: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=5),
    "int": st.integers(-(2**70), 2**70),
    "bool": st.booleans(),
    "float": st.floats(allow_nan=False) | st.integers(-(2**1100), 2**1100),
    "str | None": st.none() | st.text(max_size=5),
    "bool | None": st.none() | st.booleans(),
    "JsonObject": json_objects,
    "list[str]": st.lists(st.text(max_size=5), max_size=3),
    "list[str] | None": st.none() | st.lists(st.text(max_size=5), max_size=3),
    "list[JsonObject]": st.lists(json_objects, max_size=2),
    "dict[str, JsonObject]": st.dictionaries(st.text(max_size=5), json_objects, max_size=2),
    "str | list[JsonObject] | None": json_values,
    "list[ContentBlock]": st.lists(block_objects, max_size=2),
    "str | list[ContentBlock]": st.text(max_size=5) | st.lists(block_objects, max_size=2),
    "Usage | None": st.none() | st.deferred(lambda: objects_of(st.just(Usage))),
    "ApiMessage": st.deferred(lambda: objects_of(st.just(ApiMessage))),
    "UserContent": st.deferred(lambda: objects_of(st.just(UserContent))),
}


def objects_of(classes: st.SearchStrategy[type]) -> st.SearchStrategy[dict[str, Any]]:
    return classes.flatmap(lambda cls: objects_for(st.just(cls)).map(lambda case: case[1]))


@st.composite
def objects_for(
    draw: st.DrawFn, classes: st.SearchStrategy[type] | None = None
) -> tuple[type, dict[str, Any]]:
    """A class, and an object with its fields' wire names: most values of the field's type, some
    of another (or missing), and keys it does not name."""
    cls = draw(st.sampled_from(sorted(_RENAMES, key=lambda c: c.__name__)) if classes is None else classes)
    obj: dict[str, Any] = {}
    for field in attrs.fields(cls):
        if field.name == "extra":
            continue
        choice = draw(st.integers(0, 19))
        if choice == 0:
            continue
        typed = TYPED[cls.__annotations__[field.name]] if choice > 1 else json_values
        obj[_RENAMES[cls].get(field.name, field.name)] = draw(typed)
    obj.update(draw(st.dictionaries(st.sampled_from(["extra", "x", "y"]), json_values, max_size=2)))
    return cls, obj


@given(objects_for())
def test_the_shortcut_never_differs_from_the_converter(case: tuple[type, dict[str, Any]]) -> None:
    cls, obj = case
    fast = shortcut(obj, cls)
    if fast is not None:
        assert repr(fast) == repr(converter.structure(obj, cls))


@given(stream_messages, st.data())
def test_one_value_changed_the_shortcut_still_never_differs(message: Any, data: st.DataObject) -> None:
    cls = type(message)
    if cls not in _PLANS:
        return
    obj = unstructure_message(message)
    key = data.draw(st.sampled_from(sorted(obj)))
    obj[key] = data.draw(json_values | st.floats(allow_nan=False) | st.just(10**400))
    fast = shortcut(obj, cls)
    if fast is not None:
        assert repr(fast) == repr(converter.structure(obj, cls))
