"""hive._flags: the flags several programs share (a positive number of seconds, --log-level)."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._flags import LOG_LEVELS, add_log_level, positive_seconds


@given(st.floats() | st.integers())
def test_positive_seconds_takes_a_number_more_than_0_and_refuses_every_other(number: float) -> None:
    text = str(number)
    if number > 0:
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
    if number > 0:
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
    with pytest.raises(SystemExit):
        parser.parse_args(["--log-level", "loud"])
    assert "invalid choice: 'loud'" in capsys.readouterr().err
    monkeypatch.setenv("HIVE_LOG_LEVEL", "debug")
    parser = argparse.ArgumentParser(prog="daemon")
    add_log_level(parser)
    assert parser.parse_args([]).log_level == "debug"
