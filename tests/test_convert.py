"""hive's one strict cattrs configuration, and every record each package reads with it.

For every record of every package (its disk records and its socket lines): a valid one
round-trips through its JSON, and a value of any wrong JSON type at any field, at any depth,
is refused with a :class:`hive.errors.BadInput` naming that field's path on the wire.
"""

from __future__ import annotations

import enum
import json
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hive.agent._harness_files as agent_wire
import hive.bash.files._converter as bash_wire
import hive.subagent._convert as subagent_convert
from hive import agent_socket as wake
from hive._convert import DecodeError, StrictConverter, strict_converter, structure
from hive.agent import Item
from hive.bash import LooseEnd, TaskRecord
from hive.errors import BadInput
from hive.subagent import Caller, SessionRecord

RECORDS: list[tuple[StrictConverter, type]] = [
    (bash_wire.converter, TaskRecord),
    (bash_wire.converter, LooseEnd),
    (agent_wire.converter, agent_wire.Base),
    (agent_wire.converter, agent_wire.Added),
    (agent_wire.converter, agent_wire.Carried),
    (agent_wire.converter, agent_wire.CompactRequested),
    (agent_wire.converter, agent_wire.Compacted),
    (agent_wire.converter, agent_wire.TurnRecord),
    (agent_wire.converter, agent_wire.SessionFile),
    (agent_wire.converter, Item),
    (wake.converter, wake.Wake),
    (wake.converter, wake.Prompt),
    (wake.converter, wake.Compact),
    (wake.converter, wake.Status),
    (wake.converter, wake.AgentReply),
    (subagent_convert.converter, SessionRecord),
    (subagent_convert.converter, Caller),
]
IDS = [cls.__name__ for _, cls in RECORDS]


# -- the types of the fields ------------------------------------------------------------------------


def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def optional(kind: Any) -> tuple[Any, bool]:
    """``kind`` without its ``| None``, and whether it had one."""
    if get_origin(kind) in (typing.Union, types.UnionType):
        args = [arg for arg in get_args(kind) if arg is not type(None)]
        assert len(args) == 1, f"a union the tests do not know: {kind}"
        return args[0], len(args) < len(get_args(kind))
    return kind, False


json_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def values(kind: Any) -> st.SearchStrategy[Any]:
    """Valid values of a field of type ``kind``."""
    inner, nullable = optional(kind)
    made = _values(inner)
    return st.none() | made if nullable else made


SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    Any: json_values,
    bool: st.booleans(),
    int: st.integers(),
    float: st.floats(allow_nan=False),
    str: st.text(max_size=10),
}


def _values(kind: Any) -> st.SearchStrategy[Any]:
    origin, args = get_origin(kind), get_args(kind)
    made: st.SearchStrategy[Any] | None = SCALARS.get(kind)
    if made is None and isinstance(kind, type) and issubclass(kind, enum.Enum):
        made = st.sampled_from(kind)
    elif origin is Literal:
        made = st.sampled_from(args)
    elif origin in (tuple, list):
        made = st.lists(values(args[0]), max_size=3).map(origin)
    elif origin is dict:
        made = st.dictionaries(st.text(max_size=5), values(args[1]), max_size=3)
    elif attrs.has(kind):
        made = records_of(kind)
    assert made is not None, f"a field type the tests do not know: {kind}"
    return made


def records_of(cls: type) -> st.SearchStrategy[Any]:
    fields = hints(cls)
    return st.builds(cls, **{field.name: values(fields[field.name]) for field in attrs.fields(cls)})


WRONG: list[Any] = ["5", "true", "", 5, 0, 1, 1.5, 1.0, True, False, [], ["x"], {}, {"x": 1}, None]
"""JSON values of every type, some of each that a lenient converter would take."""


def accepts(kind: Any, value: Any) -> bool:
    """Whether ``value`` (parsed JSON) is one a field of ``kind`` takes, by the strict rules (an
    object for a record never is: the samples below hold none of its required fields)."""
    inner, nullable = optional(kind)
    origin = get_origin(inner)
    if value is None or inner is Any:
        ok = nullable or inner is Any
    elif inner is float:
        ok = type(value) in (int, float)
    elif inner in (bool, int, str):
        ok = type(value) is inner
    elif isinstance(inner, type) and issubclass(inner, enum.Enum):
        ok = any(type(value) is type(m.value) and value == m.value for m in inner)
    elif origin is Literal:
        ok = any(type(value) is type(choice) and value == choice for choice in get_args(inner))
    elif origin in (tuple, list):
        ok = type(value) is list and all(accepts(get_args(inner)[0], item) for item in value)
    else:
        assert origin is dict or attrs.has(inner), f"a field type the tests do not know: {inner}"
        ok = (
            type(value) is dict
            and origin is dict
            and all(accepts(get_args(inner)[1], v) for v in value.values())
        )
    return ok


def places(
    converter: StrictConverter, cls: type, obj: dict[str, Any], path: str = "$"
) -> list[tuple[str, Any, list[Any]]]:
    """Every field in ``obj`` (a record of ``cls`` as JSON), at any depth: its path, its type, and
    the keys that reach it."""
    wire = converter.wire_names.get(cls, {})
    fields = hints(cls)
    found: list[tuple[str, Any, list[Any]]] = []
    for field in attrs.fields(cls):
        key = wire.get(field.name, field.name)
        if key not in obj:
            continue
        kind = fields[field.name]
        here = f"{path}.{key}"
        found.append((here, kind, [key]))
        inner, _ = optional(kind)
        value = obj[key]
        if attrs.has(inner) and isinstance(value, dict):
            found += [(p, k, [key, *keys]) for p, k, keys in places(converter, inner, value, here)]
        elif get_origin(inner) in (list, tuple) and value and attrs.has(get_args(inner)[0]):
            found += [
                (p, k, [key, 0, *keys])
                for p, k, keys in places(converter, get_args(inner)[0], value[0], f"{here}[0]")
            ]
    return found


def replaced(obj: Any, keys: list[Any], value: Any) -> Any:
    """``obj`` (JSON) with the value at ``keys`` replaced."""
    if not keys:
        return value
    copy = list(obj) if isinstance(obj, list) else dict(obj)
    copy[keys[0]] = replaced(obj[keys[0]], keys[1:], value)
    return copy


# -- every record -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("converter", "cls"), RECORDS, ids=IDS)
@settings(max_examples=30)  # per record: 19 records
@given(data=st.data())
def test_every_valid_record_round_trips(converter: StrictConverter, cls: type, data: st.DataObject) -> None:
    record = data.draw(records_of(cls))
    line = json.dumps(converter.unstructure(record))
    assert structure(converter, json.loads(line), cls) == record


@pytest.mark.parametrize(("converter", "cls"), RECORDS, ids=IDS)
@settings(max_examples=30)  # per record: 19 records
@given(data=st.data())
def test_a_wrong_json_type_on_any_field_is_refused_naming_it(
    converter: StrictConverter, cls: type, data: st.DataObject
) -> None:
    obj = converter.unstructure(data.draw(records_of(cls)))
    path, kind, keys = data.draw(st.sampled_from(places(converter, cls, obj)))
    wrong = data.draw(st.sampled_from([value for value in WRONG if not accepts(kind, value)] or [None]))
    if accepts(kind, wrong):
        return  # a field of Any: nothing is wrong for it
    with pytest.raises(DecodeError) as refused:
        structure(converter, replaced(obj, keys, wrong), cls)
    assert isinstance(refused.value, BadInput)
    # The field itself, or (a wrong object for a record, a wrong item) what is wrong inside it.
    assert re.search(rf"{re.escape(path)}[:.\[]", str(refused.value)), (path, wrong, str(refused.value))


@pytest.mark.parametrize(("converter", "cls"), RECORDS, ids=IDS)
def test_a_record_of_another_json_type_is_refused(converter: StrictConverter, cls: type) -> None:
    for wrong in ([], "x", 5, None):
        with pytest.raises(DecodeError, match=r"\$: expected an object"):
            structure(converter, wrong, cls)


# -- the rules, one by one --------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    ONE = 1


@attrs.frozen
class Inner:
    pid: int


@attrs.frozen
class Sample:
    flag: bool = False
    count: int = 0
    share: float = 0.0
    text: str = ""
    colour: Colour = Colour.RED
    kind: Literal["a", 1] = "a"
    words: tuple[str, ...] = ()
    inner: list[Inner] = attrs.field(factory=list)
    table: dict[str, int] = attrs.field(factory=dict)
    maybe: int | None = None
    sender: str = ""


CONVERTER = strict_converter()
CONVERTER.register_fields(Sample, {"sender": "from"}, omit_if_default=True)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("flag", "no", "expected true or false, got a string ('no')"),
        ("flag", 1, "expected true or false, got an integer (1)"),
        ("count", True, "expected an integer, got a boolean (True)"),
        ("count", "5", "expected an integer, got a string ('5')"),
        ("count", 5.0, "expected an integer, got a number (5.0)"),
        ("share", True, "expected a number, got a boolean"),
        ("share", "1.5", "expected a number, got a string"),
        ("share", 10**400, "too large"),
        ("text", 12, "expected a string, got an integer (12)"),
        ("text", None, "expected a string, got null"),
        ("colour", "blue", "expected one of 'red', 1"),
        ("colour", True, "expected one of 'red', 1, got a boolean"),
        ("kind", True, "expected one of 'a', 1, got a boolean"),
        ("words", "ab", "expected an array, got a string"),
        ("inner", {}, "expected an array, got an object"),
        ("table", [], "expected an object, got an array"),
        ("maybe", False, "expected an integer, got a boolean"),
        ("from", 5, "expected a string"),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_saying_what_was_expected(
    field: str, value: Any, says: str
) -> None:
    with pytest.raises(DecodeError) as refused:
        structure(CONVERTER, {field: value}, Sample)
    assert f"malformed Sample: $.{field}: " in str(refused.value)
    assert says in str(refused.value)
    assert refused.value.problems == (str(refused.value).removeprefix("malformed Sample: "),)


def test_nested_paths_name_the_index_and_every_wrong_field_is_reported() -> None:
    with pytest.raises(DecodeError) as refused:
        structure(
            CONVERTER, {"inner": [{"pid": 1}, {"pid": "2"}], "table": {"k": True}, "count": "x"}, Sample
        )
    assert set(refused.value.problems) == {
        "$.inner[1].pid: expected an integer, got a string ('2')",
        "$.table['k']: expected an integer, got a boolean (True)",
        "$.count: expected an integer, got a string ('x')",
    }


def test_a_missing_field_is_named() -> None:
    with pytest.raises(DecodeError, match=r"\$\.inner\[0\]\.pid: missing \(it is required\)"):
        structure(CONVERTER, {"inner": [{}]}, Sample)


def test_valid_values_come_through_as_their_types() -> None:
    value = structure(
        CONVERTER,
        {"flag": True, "count": 3, "share": 2, "colour": 1, "kind": 1, "words": ["w"], "from": "me"},
        Sample,
    )
    assert value == Sample(True, 3, 2.0, colour=Colour.ONE, kind=1, words=("w",), sender="me")
    assert type(value.share) is float
    assert CONVERTER.unstructure(value) == {
        "flag": True,
        "count": 3,
        "share": 2.0,
        "colour": 1,
        "kind": 1,
        "words": ["w"],
        "from": "me",
    }


# -- tagged unions ---------------------------------------------------------------------------------


@attrs.frozen
class Circle:
    radius: int
    shape: str = "circle"


@attrs.frozen
class Square:
    side: int
    shape: str = "square"


@attrs.frozen
class OtherShape:
    shape: str
    data: dict[str, Any]


@attrs.frozen
class Drawing:
    shapes: list[Circle | Square | OtherShape]


def shapes_converter() -> StrictConverter:
    made = strict_converter()
    made.register_tagged_union(
        Circle | Square | OtherShape, "shape", {"circle": Circle, "square": Square}, OtherShape
    )
    return made


def test_a_tagged_union_is_told_by_its_key_and_keeps_any_other_tag_whole() -> None:
    made = shapes_converter()
    wire = {
        "shapes": [
            {"shape": "circle", "radius": 1},
            {"shape": "square", "side": 2},
            {"shape": "star", "n": 5},
        ]
    }
    drawing = structure(made, wire, Drawing)
    assert drawing == Drawing([Circle(1), Square(2), OtherShape("star", {"shape": "star", "n": 5})])
    assert made.unstructure(drawing) == wire
    assert structure(made, {"shapes": [{"radius": 1}]}, Drawing).shapes == [OtherShape("None", {"radius": 1})]


def test_a_tagged_union_refuses_what_is_not_an_object_or_is_a_wrong_variant() -> None:
    with pytest.raises(DecodeError) as refused:
        structure(shapes_converter(), {"shapes": [3]}, Drawing)
    assert refused.value.problems == ("$.shapes[0]: expected an object, got an integer (3)",)
    with pytest.raises(DecodeError) as refused:
        structure(shapes_converter(), {"shapes": [{"shape": "circle", "radius": "1"}]}, Drawing)
    assert refused.value.problems == ("$.shapes[0].radius: expected an integer, got a string ('1')",)
