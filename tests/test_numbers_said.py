"""Messages say a number one way: a time as ``2.0 s`` or ``42 s`` (``in_seconds``), a count as
``1 task`` or ``2 tasks`` (``counted``), and the source does not go back to saying them by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._when import WHOLE_FROM, counted, in_seconds, span

HIVE = Path(__file__).resolve().parent.parent / "hive"

times = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)


def said(text: str) -> float:
    match = re.fullmatch(r"(\d+)(\.\d)? s", text)
    assert match is not None, f"{text!r} is not said as seconds"
    return float(match[1] + (match[2] or ""))


@given(times)
def test_a_time_is_said_to_a_tenth_below_ten_seconds_and_whole_from_there(seconds: float) -> None:
    text = in_seconds(seconds)
    value = said(text)
    whole = "." not in text
    assert whole == (round(seconds, 1) >= WHOLE_FROM)
    assert abs(value - max(0.0, seconds)) <= (0.5 if whole else 0.05 + 1e-9)


@given(times, times)
def test_a_longer_time_is_never_said_as_a_shorter_one(a: float, b: float) -> None:
    shorter, longer = sorted((a, b))
    assert said(in_seconds(shorter)) <= said(in_seconds(longer))


@given(st.floats(min_value=-1e3, max_value=59.4, allow_nan=False))
def test_a_span_under_a_minute_is_said_in_seconds(seconds: float) -> None:
    assert span(seconds) == in_seconds(seconds)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-1, "0.0 s"),
        (0, "0.0 s"),
        (0.25, "0.2 s"),
        (2, "2.0 s"),
        (9.94, "9.9 s"),
        (9.96, "10 s"),
        (600, "600 s"),
    ],
)
def test_times_as_they_are_said(seconds: float, text: str) -> None:
    assert in_seconds(seconds) == text


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["task", "loose end", "subagent"]))
def test_a_count_says_one_thing_and_any_other_number_of_things(n: int, thing: str) -> None:
    assert counted(n, thing) == (f"1 {thing}" if n == 1 else f"{n} {thing}s")
    assert counted(n, "process", "processes") == ("1 process" if n == 1 else f"{n} processes")


HAND_MADE = {
    r"\} s\b": "a time said by hand: use hive._when.in_seconds (or span)",
    r":\.\d+f\}s\b": "a time said by hand: use hive._when.in_seconds (or span)",
    r"%(\.\d)?[dfgs] s\b": "a time logged by hand: log hive._when.in_seconds(...) with %s",
    r"\(s\)": "a count said with (s): use hive._when.counted",
    r"""(['"])s\1 if|else (['"])s\2""": "a plural made by hand: use hive._when.counted",
}


def test_no_message_says_a_time_or_a_count_by_hand() -> None:
    found = [
        f"{path.relative_to(HIVE.parent)}:{number}: {why}: {line.strip()}"
        for path in sorted(HIVE.rglob("*.py"))
        if path.name != "_when.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for pattern, why in HAND_MADE.items()
        if re.search(pattern, line)
    ]
    assert not found, "\n".join(found)
