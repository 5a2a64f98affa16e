"""RuntimeSpec.from_env, Config and open_runtime: clear errors that name the culprit."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive.runtime import Backend, CompactionPolicy, Config, RuntimeSpec, SpecError, open_runtime


def test_defaults_to_claude() -> None:
    spec = RuntimeSpec.from_env({})
    assert (spec.backend, spec.claude_command) == (Backend.CLAUDE, "claude")


def test_reads_every_variable() -> None:
    spec = RuntimeSpec.from_env(
        {
            "HIVE_RUNTIME": "acp",
            "HIVE_ACP_COMMAND": "/opt/agent",
            "HIVE_ACP_ARGS": '["--x", "y z"]',
            "HIVE_ACP_ENV": '{"B": "2", "A": "1"}',
            "HIVE_CLAUDE_COMMAND": "/opt/claude",
        }
    )
    assert spec.backend is Backend.ACP
    assert spec.command == "/opt/agent"
    assert spec.args == ("--x", "y z")
    assert spec.env == (("A", "1"), ("B", "2"))
    assert spec.claude_command == "/opt/claude"


@pytest.mark.parametrize(
    ("env", "variable", "says"),
    [
        ({"HIVE_RUNTIME": "gpt"}, "HIVE_RUNTIME", "use 'claude' or 'acp'"),
        ({"HIVE_RUNTIME": "acp"}, "HIVE_ACP_COMMAND", "is required"),
        ({"HIVE_ACP_ARGS": "--x"}, "HIVE_ACP_ARGS", "not valid JSON"),
        ({"HIVE_ACP_ARGS": '{"a": 1}'}, "HIVE_ACP_ARGS", "JSON list of strings"),
        ({"HIVE_ACP_ARGS": "[1, 2]"}, "HIVE_ACP_ARGS", "JSON list of strings"),
        ({"HIVE_ACP_ENV": '["A=1"]'}, "HIVE_ACP_ENV", "JSON object of strings"),
        ({"HIVE_ACP_ENV": '{"A": 1}'}, "HIVE_ACP_ENV", "JSON object of strings"),
    ],
)
def test_a_malformed_value_names_its_variable(env: dict[str, str], variable: str, says: str) -> None:
    with pytest.raises(SpecError, match=says) as caught:
        RuntimeSpec.from_env(env)
    assert caught.value.variable == variable
    assert str(caught.value).startswith(variable)


@given(st.text(), st.text())
def test_any_acp_args_and_env_parse_or_raise_spec_error(args: str, env: str) -> None:
    try:
        spec = RuntimeSpec.from_env({"HIVE_ACP_ARGS": args, "HIVE_ACP_ENV": env})
    except SpecError as exc:
        assert exc.variable in {"HIVE_ACP_ARGS", "HIVE_ACP_ENV"}
    else:
        if args.strip():
            assert list(spec.args) == json.loads(args)


@given(st.lists(st.text(), max_size=4), st.dictionaries(st.text(), st.text(), max_size=4))
def test_well_formed_json_round_trips(args: list[str], env: dict[str, str]) -> None:
    spec = RuntimeSpec.from_env({"HIVE_ACP_ARGS": json.dumps(args), "HIVE_ACP_ENV": json.dumps(env)})
    assert list(spec.args) == args
    assert dict(spec.env) == env


def test_the_watermark_is_a_fraction() -> None:
    with pytest.raises(ValueError, match="fraction"):
        CompactionPolicy(watermark=1.5)
    assert CompactionPolicy(watermark=None).watermark is None


async def test_a_runtime_hive_does_not_have_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    from hive.runtime import _spec

    monkeypatch.setitem(_spec.BACKENDS, Backend.ACP, "hive.no_such_backend:open")
    with pytest.raises(SpecError, match="not available"):
        async with open_runtime(RuntimeSpec(backend=Backend.ACP, command="x"), Config()):
            pass
