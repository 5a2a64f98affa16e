"""The matching lines of one watch wake, kept as they are found and bounded whatever the output:
the first `SHOWN_LINES` of each stream, each cut to `SHOWN_CHARS`, and a count of all of them.

A wake shows stdout's lines before stderr's (two files have no order between them), each
stream's in order, at most `SHOWN_LINES` in all, and says how many more there were.
"""

from __future__ import annotations

import attrs

from hive._when import counted

SHOWN_LINES = 40
"""The most matching lines a wake shows."""
SHOWN_CHARS = 500
"""The most characters a wake shows of one line."""
STREAMS = ("stdout", "stderr")


@attrs.define
class Matches:
    """The matching lines found since the last wake was composed."""

    count: int = 0
    """How many were found, shown or not."""
    _shown: dict[str, list[str]] = attrs.field(factory=lambda: {stream: [] for stream in STREAMS})

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, stream: str, line: bytes) -> None:
        """One more matching line of ``stream``; kept only if a wake could show it."""
        self.count += 1
        shown = self._shown[stream]
        if len(shown) < SHOWN_LINES:
            # A character is at most 4 bytes: these bytes hold the characters shown.
            shown.append(line[: SHOWN_CHARS * 4].decode("utf-8", errors="replace")[:SHOWN_CHARS])

    def lines(self) -> list[str]:
        """The body's lines: those shown, each with its stream, and how many more there were."""
        shown = [f"[{stream}] {line}" for stream in STREAMS for line in self._shown[stream]][:SHOWN_LINES]
        if self.count > len(shown):
            shown.append(f"(and {counted(self.count - len(shown), 'more matching line')})")
        return shown
