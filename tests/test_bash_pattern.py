"""``notify_on`` patterns: what RE2 refuses at run, the pieces a long line is searched in, and
the bounds that drop a pattern. In-process: the daemon's part is in test_bash_watch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive.bash import BadArgument
from hive.bash.ends import _pattern
from hive.bash.ends._pattern import LINE_BYTES, compile_pattern, pieces, search_lines


@given(st.binary(max_size=3 * LINE_BYTES + 7).map(lambda head: head * 2))
def test_a_line_is_searched_in_pieces_of_at_most_line_bytes_that_make_it_up(line: bytes) -> None:
    parts = pieces(line)
    assert b"".join(parts) == line
    assert all(len(part) <= LINE_BYTES for part in parts)
    assert len(parts) == max(1, -(-len(line) // LINE_BYTES))


def test_a_pattern_too_large_for_its_memory_is_refused() -> None:
    with pytest.raises(
        BadArgument, match=r"is not a pattern RE2 takes \(pattern too large - compile failed\)"
    ):
        compile_pattern(r"\pL{300}")


def test_the_searches_stop_where_the_task_goes_over_its_time_in_all() -> None:
    pattern = compile_pattern("^hit")
    lines = [b"hit", b"miss", b"hit"]
    assert search_lines(pattern, lines, spent=0.0) == _pattern.Searched((0, 2), pytest.approx(0, abs=1))
    # Its earlier searches took more than all of the task's time: the first line is the last searched.
    over = search_lines(pattern, lines, spent=_pattern.TASK_SECONDS + 1)
    assert over.matches == (0,)
    assert over.over == "searching the task's lines took over 30 s of CPU time in all"


def test_a_line_is_searched_as_utf8_bytes() -> None:
    pattern = compile_pattern("é+$")
    assert search_lines(pattern, ["café".encode(), b"caf\xff"], spent=0.0).matches == (0,)
