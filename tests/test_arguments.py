"""One policy for every MCP tool's arguments (hive._arguments), checked on the schemas the tools list.

In-process: the bash, subagent and hyperhive tools all check their arguments with it, so a
bad call gets the same answer whichever tool it is made to.
"""

from __future__ import annotations

import math
from typing import Any, cast

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from hive._arguments import ArgumentError, arguments_object, check_arguments
from hive._limits import MAX_WAIT
from hive.agent import TOOLS as HYPERHIVE_TOOLS
from hive.agent import HyperhiveTools
from hive.bash import TOOLS as BASH_TOOLS
from hive.bash import BashTools, TaskManager
from hive.errors import BadInput
from hive.subagent import TOOLS as SUBAGENT_TOOLS
from tests.helpers.strategies import json_values

SCHEMAS: dict[str, dict[str, Any]] = {
    **{f"bash.{spec.name}": spec.input_schema for spec in BASH_TOOLS},
    **{f"subagent.{tool['name']}": tool["inputSchema"] for tool in SUBAGENT_TOOLS},
    **{f"hyperhive.{tool['name']}": tool["input_schema"] for tool in HYPERHIVE_TOOLS},
}
CAPPED = {"wait_seconds": MAX_WAIT}
ARGUMENTS = sorted((tool, key) for tool, schema in SCHEMAS.items() for key in schema.get("properties", {}))


def kinds(spec: dict[str, Any]) -> set[str]:
    kind = spec.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


def valid_value(spec: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values ``spec`` takes."""
    if "enum" in spec:
        return st.sampled_from([choice for choice in spec["enum"] if choice is not None])
    if "pattern" in spec:
        return st.from_regex(spec["pattern"].strip("^$"), fullmatch=True)
    if kinds(spec) & {"number", "integer"}:
        low = spec.get("minimum", spec.get("exclusiveMinimum", 0))
        high = spec.get("maximum", 1e6)
        if "integer" in kinds(spec):
            return st.integers(math.ceil(low) + ("exclusiveMinimum" in spec), int(high))
        return st.floats(low, high, exclude_min="exclusiveMinimum" in spec)
    if kinds(spec) == {"boolean"}:
        return st.booleans()
    assert kinds(spec) == {"string"}, spec
    return st.text(min_size=max(spec.get("minLength", 0), 1), max_size=20).filter(str.strip)


def valid_call(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    schema = SCHEMAS[tool]
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    return st.fixed_dictionaries(
        {key: valid_value(properties[key]) for key in required},
        optional={key: valid_value(spec) for key, spec in properties.items() if key not in required},
    )


def wrong_values(spec: dict[str, Any]) -> list[Any]:
    """Values of JSON types ``spec`` does not take (a string of digits is a number: see below)."""
    wrong: list[Any] = [[], {"x": 1}]
    if not kinds(spec) & {"number", "integer"}:
        wrong += [5, 1.5]
    if "boolean" not in kinds(spec):
        wrong += [True, False]
    if "string" not in kinds(spec):
        wrong += ["soon", ""]
    return wrong


# -- the policy, on every argument of every tool ----------------------------------------------------


@settings(max_examples=40)
@given(data=st.data())
def test_a_valid_call_is_taken_with_the_schemas_defaults(data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(sorted(SCHEMAS)))
    given_args = data.draw(valid_call(tool))
    checked = check_arguments(SCHEMAS[tool], given_args, capped=CAPPED)
    properties = SCHEMAS[tool].get("properties", {})
    for key, spec in properties.items():
        if key in given_args:
            expected = min(given_args[key], CAPPED[key]) if key in CAPPED else given_args[key]
            assert checked[key] == expected
        elif "default" in spec:
            assert checked[key] == spec["default"]
        else:
            assert key not in checked


@pytest.mark.parametrize(("tool", "key"), ARGUMENTS)
def test_a_wrong_json_type_is_refused_naming_the_argument_and_what_it_takes(tool: str, key: str) -> None:
    schema = SCHEMAS[tool]
    spec = schema["properties"][key]
    base = {name: "x" for name in schema.get("required", ()) if name != key}
    for wrong in wrong_values(spec):
        with pytest.raises(ArgumentError) as refused:
            check_arguments(schema, {**base, key: wrong}, capped=CAPPED)
        message = str(refused.value)
        assert isinstance(refused.value, BadInput)
        assert key in message and " must be " in message, message


@pytest.mark.parametrize(
    ("tool", "key"),
    [(t, k) for t, k in ARGUMENTS if kinds(SCHEMAS[t]["properties"][k]) & {"number", "integer"}],
)
def test_numbers_never_come_from_booleans_and_may_come_as_strings(tool: str, key: str) -> None:
    """A string holding a number counts as one everywhere: the bash tools always took them
    (tests/test_daemon_input.py promises it), so one policy takes them for every tool."""
    schema = SCHEMAS[tool]
    base = {name: "x" for name in schema.get("required", ()) if name != key}
    for boolean in (True, False):
        with pytest.raises(ArgumentError, match=f"{key} must be a (whole )?number"):
            check_arguments(schema, {**base, key: boolean}, capped=CAPPED)
    assert check_arguments(schema, {**base, key: "7"}, capped=CAPPED)[key] == 7
    for text in ("soon", "7 s", "inf", "nan"):
        with pytest.raises(ArgumentError, match=key):
            check_arguments(schema, {**base, key: text}, capped=CAPPED)


@pytest.mark.parametrize(
    ("tool", "key"),
    [(t, k) for t, k in ARGUMENTS if kinds(SCHEMAS[t]["properties"][k]) & {"number", "integer"}],
)
def test_an_out_of_range_number_is_refused_naming_the_range(tool: str, key: str) -> None:
    schema = SCHEMAS[tool]
    base = {name: "x" for name in schema.get("required", ()) if name != key}
    with pytest.raises(ArgumentError) as refused:
        check_arguments(schema, {**base, key: -1}, capped=CAPPED)
    message = str(refused.value)
    assert message.startswith(f"{key} must be a ") and "must not be negative" in message, message
    spec = schema["properties"][key]
    ranges = ("0 or more", "more than 0", f"from {spec.get('minimum')} to {spec.get('maximum')}")
    assert any(words in message for words in ranges), message


@given(st.sampled_from(sorted(SCHEMAS)), st.text(min_size=1, max_size=12))
def test_an_unknown_argument_is_refused_naming_it_and_those_the_tool_takes(tool: str, name: str) -> None:
    schema = SCHEMAS[tool]
    properties = schema.get("properties", {})
    if name in properties:
        return
    with pytest.raises(ArgumentError) as refused:
        check_arguments(schema, {name: 1})
    takes = ", ".join(properties) if properties else "no arguments"
    assert str(refused.value) == f"1 unknown argument: {name}; this tool takes {takes}"


@given(
    st.sampled_from(sorted(SCHEMAS)), json_values.filter(lambda v: v is not None and not isinstance(v, dict))
)
def test_arguments_that_are_not_an_object_are_refused_saying_what_they_are(
    tool: str, arguments: object
) -> None:
    schema = SCHEMAS[tool]
    with pytest.raises(ArgumentError) as refused:
        check_arguments(schema, arguments)
    kind = {bool: "a boolean", int: "a number", str: "a string", list: "an array"}[type(arguments)]
    properties = schema.get("properties", {})
    takes = ", ".join(properties) if properties else "no arguments"
    assert (
        str(refused.value)
        == f"arguments must be an object naming each argument, not {kind}; this tool takes {takes}"
    )
    assert arguments_object(schema, None) == {}


def test_a_wait_longer_than_the_cap_is_taken_as_the_cap_in_every_tool() -> None:
    for tool, schema in SCHEMAS.items():
        if "wait_seconds" in schema.get("properties", {}):
            base = {name: "x" for name in schema.get("required", ())}
            assert (
                check_arguments(schema, {**base, "wait_seconds": 1e9}, capped=CAPPED)["wait_seconds"]
                == MAX_WAIT
            ), tool


def test_null_is_an_argument_left_out() -> None:
    schema = SCHEMAS["bash.run"]
    assert check_arguments(schema, {"cmd": "true", "wait_seconds": None, "name": None, "full": None}) == {
        "cmd": "true",
        "wait_seconds": 3.0,
        "full": False,
    }
    with pytest.raises(ArgumentError, match="cmd is required: give a string"):
        check_arguments(schema, {"cmd": None})


def test_each_message_says_what_was_wrong() -> None:
    run, start = SCHEMAS["bash.run"], SCHEMAS["subagent.start"]
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        (run, {}, "cmd is required: give a string of at least 1 character"),
        (run, {"cmd": ""}, "cmd is empty: it must be a string of at least 1 character"),
        (run, {"cmd": 5}, "cmd is required and must be a string of at least 1 character, not 5"),
        (run, {"cmd": "x", "timeout_secs": 0}, "timeout_secs must be a number, more than 0, not 0"),
        (
            run,
            {"cmd": "x", "name": "a b"},
            "bad name 'a b': use 1 to 64 ASCII letters, digits, '.', '_' or '-'",
        ),
        (run, {"cmd": "x", "name": "a\n"}, "bad name 'a\\n'"),
        (
            start,
            {"name": "r", "prompt": "x", "runtime": "gpt"},
            "runtime must be 'claude' or 'acp', not 'gpt'",
        ),
        (SCHEMAS["bash.list"], {"limit": 2.5}, "limit must be a whole number, 0 or more, not 2.5"),
        (
            SCHEMAS["hyperhive.compact"],
            {"now": True},
            "1 unknown argument: now; this tool takes no arguments",
        ),
    ]
    for schema, arguments, says in cases:
        with pytest.raises(ArgumentError) as refused:
            check_arguments(schema, arguments, capped=CAPPED)
        assert str(refused.value).startswith(says), (arguments, str(refused.value))


def test_an_argument_still_accepted_though_no_longer_listed_is_dropped() -> None:
    schema = SCHEMAS["subagent.interrupt"]
    assert check_arguments(schema, {"name": "a", "force": True}, ignored=("force",)) == {"name": "a"}
    with pytest.raises(ArgumentError, match="unknown argument"):
        check_arguments(schema, {"name": "a", "force": True})


# -- the tools use it -------------------------------------------------------------------------------


async def test_the_bash_and_hyperhive_tools_answer_a_bad_call_with_the_policys_message() -> None:
    async def never() -> None:
        raise AssertionError("a refused call must not reach the tool")

    # A refused call never reaches the task manager.
    bash = BashTools(cast(TaskManager, None))
    hyperhive = HyperhiveTools(cast(Any, None), never)
    for tools, tool, arguments in [
        (bash, "run", {"cmd": "true", "wait_seconds": True}),
        (bash, "list", {"limit": -1}),
        (hyperhive, "loose_ends", {"limit": -1}),
        (hyperhive, "compact", {"now": True}),
    ]:
        schema = SCHEMAS[f"{'bash' if tools is bash else 'hyperhive'}.{tool}"]
        with pytest.raises(ArgumentError) as expected:
            check_arguments(schema, arguments, capped=CAPPED)
        with trio.fail_after(5):
            result = await tools.call(tool, arguments)
        assert result.is_error and result.text == str(expected.value)
        error = {"error": "BadArgument", "message": str(expected.value)}
        if tools is not bash:
            assert result.structured == error
            continue
        # An agent's bash error is its text alone; a program's (full) says its kind too.
        assert result.structured is None
        if tool == "run":
            with trio.fail_after(5):
                full = await tools.call(tool, {**arguments, "full": True})
            assert full.structured == error
