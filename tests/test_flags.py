"""hive._flags: the flags several programs share (a positive number of seconds, --log-level, a
turn's settings as `hive run` and `hive-agent` both read them)."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._flags import (
    LOG_LEVELS,
    add_log_level,
    compact_at,
    from_environment,
    idle_timeout,
    positive_seconds,
    setting,
    stop_grace,
    yes_no,
)
from hive.errors import BadInput


@given(st.floats() | st.integers())
def test_positive_seconds_takes_a_number_more_than_0_and_refuses_every_other(number: float) -> None:
    text = str(number)
    if number > 0 and math.isfinite(number):
        assert positive_seconds(text) == float(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="is not a positive number of seconds"):
            positive_seconds(text)


@given(st.text())
def test_positive_seconds_refuses_text_that_is_no_number_naming_it(text: str) -> None:
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if number > 0 and math.isfinite(number):
        assert positive_seconds(text) == number
    else:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            positive_seconds(text)
        assert str(refused.value) == f"{text!r} is not a positive number of seconds"


def test_log_level_defaults_to_info_or_hive_log_level_and_takes_only_the_levels(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HIVE_LOG_LEVEL", raising=False)
    parser = argparse.ArgumentParser(prog="daemon")
    add_log_level(parser)
    assert parser.parse_args([]).log_level == "info"
    assert [parser.parse_args(["--log-level", level]).log_level for level in LOG_LEVELS] == list(LOG_LEVELS)
    assert parser.parse_args(["--log-level", "WARNING"]).log_level == "warning"
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
    assert "'loud' is not a log level: give one of debug, info, warning, error" in capsys.readouterr().err
    monkeypatch.setenv("HIVE_LOG_LEVEL", "debug")
    parser = argparse.ArgumentParser(prog="daemon")
    add_log_level(parser)
    assert parser.parse_args([]).log_level == "debug"
    # A bad HIVE_LOG_LEVEL is refused as bad input (exit 2, a usage line), not a traceback.
    monkeypatch.setenv("HIVE_LOG_LEVEL", "loud")
    parser = argparse.ArgumentParser(prog="daemon")
    add_log_level(parser)
    with pytest.raises(SystemExit) as refused:
        parser.parse_args([])
    assert refused.value.code == 2
    assert "in HIVE_LOG_LEVEL" in capsys.readouterr().err


def as_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


@given(st.floats().map(str) | st.integers().map(str) | st.text())
def test_idle_timeout_takes_finite_seconds_above_0_only(text: str) -> None:
    number = as_number(text)
    if number > 0 and math.isfinite(number):
        assert idle_timeout(text) == number
    else:
        with pytest.raises(ValueError) as refused:
            idle_timeout(text)
        assert str(refused.value) == f"{text!r} is not a number of seconds above 0; leave it out for never"


@given(st.floats().map(str) | st.integers().map(str) | st.text())
def test_stop_grace_takes_finite_seconds_of_0_or_more_only(text: str) -> None:
    number = as_number(text)
    if number >= 0 and math.isfinite(number):
        assert stop_grace(text) == number
    else:
        with pytest.raises(ValueError, match="is not a number of seconds of 0 or more"):
            stop_grace(text)


@given(st.floats().map(str) | st.integers().map(str) | st.text())
def test_compact_at_takes_a_fraction_in_0_1_or_off(text: str) -> None:
    number = as_number(text)
    if text.strip().lower() in ("off", "never", "none"):
        assert compact_at(text) is None
    elif 0 < number <= 1:
        assert compact_at(text) == number
    else:
        with pytest.raises(ValueError) as refused:
            compact_at(text)
        assert str(refused.value) == (
            f"{text!r} is not a fraction of the context window in (0, 1] (e.g. 0.8), nor 'off'"
        )


def test_a_refused_setting_is_bad_input_naming_where_it_came_from() -> None:
    assert setting("--stop-grace", "0", stop_grace) == 0
    with pytest.raises(BadInput) as refused:
        setting("HIVE_STOP_GRACE", "-3", stop_grace)
    assert str(refused.value).startswith("HIVE_STOP_GRACE: '-3' is not a number of seconds of 0 or more")
    assert refused.value.exit_code == 2

    class Mine(BadInput):
        pass

    with pytest.raises(Mine, match=r"^--compact-at: '5' is not a fraction"):
        setting("--compact-at", "5", compact_at, Mine)


def test_log_level_help_says_what_it_does_and_its_default() -> None:
    parser = argparse.ArgumentParser(prog="daemon")
    add_log_level(parser)
    text = " ".join(parser.format_help().split())
    assert "--log-level LEVEL" in text
    assert "debug, info" in text and "[HIVE_LOG_LEVEL; default info]" in text


@given(st.text(max_size=8))
def test_a_switch_is_a_yes_or_a_no_and_nothing_else(text: str) -> None:
    word = text.strip().lower()
    if word in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        assert yes_no(text) is (word in ("1", "true", "yes", "on"))
    else:
        with pytest.raises(ValueError, match="is not a yes or no; use 1 or 0"):
            yes_no(text)


def test_a_variable_is_read_as_its_flag_is_and_blank_is_unset() -> None:
    env = {"HIVE_STOP_GRACE": "4", "HIVE_BLANK": ""}
    assert from_environment("HIVE_STOP_GRACE", stop_grace, 9.0, env=env) == 4.0
    assert from_environment("HIVE_BLANK", stop_grace, 9.0, env=env) == 9.0
    assert from_environment("HIVE_UNSET", stop_grace, 9.0, env=env) == 9.0
    with pytest.raises(BadInput, match=r"^HIVE_N: 'x' is not a positive number of seconds"):
        from_environment("HIVE_N", positive_seconds, 1.0, env={"HIVE_N": "x"})  # an argparse type's refusal
