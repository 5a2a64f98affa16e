"""hive.sink's structuring shortcut gives exactly what its cattrs converter gives, or stands aside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hive.sink import converter, unstructure_message
from hive.sink._stream_json import _PLANS, _build, _Slow
from tests.helpers.strategies import json_values, objects_for, stream_messages

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
    from hive.sink._messages import LINES, SystemInit, SystemMessage

    if obj["type"] == "system":
        return SystemInit if obj.get("subtype") == "init" else SystemMessage
    return LINES[obj["type"]]


@given(stream_messages)
def test_well_typed_messages_take_the_shortcut(message: Any) -> None:
    obj = unstructure_message(message)
    if type(message) in _PLANS:
        fast = shortcut(obj, type(message))
        assert fast is not None
        assert repr(fast) == repr(converter.structure(obj, type(message)))


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
