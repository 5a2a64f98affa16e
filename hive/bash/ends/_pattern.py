"""``notify_on`` patterns: RE2 regular expressions, searched in output lines off the event loop,
within bounds of time and length.

RE2 (the ``google-re2`` binding) matches in time linear in the line, never backtracking: the
features that need backtracking (backreferences, lookaround) are refused when the pattern is
compiled, at ``run``. Linear still has a factor, the size of the compiled pattern, so three bounds
hold besides: the pattern's program fits in `PROGRAM_MEMORY`, a search sees at most `LINE_BYTES`
of a line, and each search is timed (CPU time of the searching thread): a line that takes over
the settings' ``line_seconds`` (`LINE_SECONDS`), or a task whose searches take over `TASK_SECONDS` in all, has its pattern
dropped. The binding releases the GIL while it searches, so a worker thread searching leaves the
daemon's loop free to answer; the searches run in `search_lines`, a blocking call for such a thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import attrs
import re2

from hive._when import in_seconds
from hive.bash._errors import BadArgument
from hive.bash._settings import LINE_SECONDS

MAX_PATTERN = 1000
"""The longest ``notify_on`` pattern, in characters."""
PROGRAM_MEMORY = 1 << 20
"""RE2's memory for a pattern's program and its search cache: a pattern larger is refused."""
LINE_BYTES = 64 << 10
"""The most of a line one search sees: a longer line is searched as lines of this length."""
TASK_SECONDS = 30.0
"""The most CPU time the searches of one task's lines may take in all before its pattern is dropped."""
FEATURES = "RE2 syntax, which is Python's re without backreferences and lookaround (they backtrack)"
"""What a pattern may use, for the tools' descriptions."""


def compile_pattern(pattern: str) -> Pattern:
    """``notify_on`` compiled; a `BadArgument` saying why if RE2 does not take it."""
    if len(pattern) > MAX_PATTERN:
        raise BadArgument(f"notify_on is {len(pattern)} characters long; at most {MAX_PATTERN} are taken")
    options = re2.Options()
    options.max_mem = PROGRAM_MEMORY
    options.never_capture = True  # whether a line matches is all that is asked
    options.log_errors = False
    try:
        return Pattern(re2.compile(pattern, options))
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else "refused"
        raise BadArgument(
            f"notify_on {pattern!r} is not a pattern RE2 takes ({reason}). Give one in {FEATURES}, whose "
            f"program fits in {PROGRAM_MEMORY >> 20} MiB; a line that it matches anywhere wakes you"
        ) from None


@attrs.frozen
class Pattern:
    """A compiled ``notify_on`` pattern."""

    _compiled: Any  # re2's compiled pattern (google-re2 has no type information)

    def search(self, line: bytes) -> bool:
        """Whether ``line`` (UTF-8, no newline) matches anywhere. Blocking: a worker thread's."""
        return self._compiled.search(line) is not None


@attrs.frozen
class Searched:
    """What `search_lines` found: the lines that match, and the CPU time it took; ``over`` says
    which bound the pattern went over, if it did (the lines after the one that did were not
    searched)."""

    matches: tuple[int, ...]
    seconds: float
    over: str | None = None


def pieces(line: bytes) -> list[bytes]:
    """``line`` as the lines a search sees: pieces of at most `LINE_BYTES`."""
    if len(line) <= LINE_BYTES:
        return [line]
    return [line[start : start + LINE_BYTES] for start in range(0, len(line), LINE_BYTES)]


def search_lines(
    pattern: Pattern, lines: Sequence[bytes], *, spent: float, line_seconds: float = LINE_SECONDS
) -> Searched:
    """The indices of ``lines`` that ``pattern`` matches, searched in order until a line takes
    over ``line_seconds`` or the task's searches over `TASK_SECONDS` (``spent`` so far). Blocking:
    run it in a worker thread."""
    matches: list[int] = []
    seconds = 0.0
    for index, line in enumerate(lines):
        started = time.thread_time()
        if pattern.search(line):
            matches.append(index)
        took = time.thread_time() - started
        seconds += took
        if took > line_seconds:
            over = (
                f"searching one line took {in_seconds(took)} of CPU time (at most {in_seconds(line_seconds)})"
            )
            return Searched(tuple(matches), seconds, over)
        if spent + seconds > TASK_SECONDS:
            over = f"searching the task's lines took over {in_seconds(TASK_SECONDS)} of CPU time in all"
            return Searched(tuple(matches), seconds, over)
    return Searched(tuple(matches), seconds)
