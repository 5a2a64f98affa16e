"""Runs of stream-json lines, exactly as the agent wrote them, and the framer that cuts them.

The hot path touches no line one by one: a chunk read from the agent is cut at its last
newline, checked for shape with a few byte counts, and handed on whole. Only a chunk that
fails the check is split, and only the lines a reader asks for are parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import repeat

import attrs

from hive.sink._messages import JsonObject, StreamMessage
from hive.sink._wire import MessageError, encode_message, parse_line

DEFAULT_MAX_LINE = 64 * 1024 * 1024


@attrs.frozen
class Batch:
    """One or more complete stream-json lines, each ending in a newline, unchanged."""

    data: bytes
    _lines: list[bytes] | None = attrs.field(default=None, eq=False, repr=False, alias="lines")

    def __len__(self) -> int:
        return len(self._lines) if self._lines is not None else self.data.count(b"\n")

    def lines(self) -> list[bytes]:
        """The lines, without their newlines."""
        if self._lines is not None:
            return self._lines
        return self.data.split(b"\n")[:-1]

    def objects(self) -> Iterator[JsonObject]:
        for line in self.lines():
            yield json.loads(line)

    def messages(self) -> Iterator[StreamMessage]:
        """The lines as typed messages (a line that does not parse raises MessageError)."""
        for line in self.lines():
            yield parse_line(line)

    def line_at(self, index: int) -> bytes:
        """The line that holds byte ``index`` of ``data``."""
        start = self.data.rfind(b"\n", 0, index) + 1
        return self.data[start : self.data.index(b"\n", index)]

    @classmethod
    def of(cls, messages: Iterable[StreamMessage | JsonObject]) -> Batch:
        return cls(b"".join(encode_message(m) for m in messages))


@attrs.frozen
class Dropped:
    """A piece of the agent's output that is not a stream-json line, with the reason."""

    reason: str
    sample: bytes


@attrs.define
class LineFramer:
    """Cuts an agent's stdout into Batches of well-formed lines.

    Kept: lines that start with ``{`` and end with ``}``. Dropped (and reported): other
    non-blank lines (log text some builds print on stdout), a line longer than
    ``max_line`` (so one runaway line cannot take all memory), and a last line that
    ends without a newline and does not parse.
    """

    max_line: int = DEFAULT_MAX_LINE
    _pending: bytearray = attrs.field(factory=bytearray)
    _skipping: bool = False

    def feed(self, chunk: bytes | bytearray) -> tuple[Batch | None, list[Dropped]]:
        dropped: list[Dropped] = []
        end = chunk.rfind(b"\n")
        if end < 0:
            self._hold(chunk, dropped)
            return None, dropped
        if self._skipping:
            self._skipping = False
            data = bytes(chunk[chunk.find(b"\n") + 1 : end + 1])
        elif self._pending:
            data = bytes(self._pending) + memoryview(chunk)[: end + 1]
            self._pending.clear()
        else:
            data = bytes(chunk) if end == len(chunk) - 1 else bytes(chunk[: end + 1])
        self._hold(chunk[end + 1 :], dropped)
        return (self._check(data, dropped) if data else None), dropped

    def close(self) -> tuple[Batch | None, list[Dropped]]:
        """At end of output: a last line without its newline is kept only if it parses."""
        tail = bytes(self._pending).strip()
        self._pending.clear()
        if not tail or self._skipping:
            return None, []
        try:
            json.loads(tail)
        except (ValueError, RecursionError):
            return None, [Dropped("the output ended in the middle of a line", tail[:200])]
        if not tail.startswith(b"{"):
            return None, [Dropped("not a stream-json object", tail[:200])]
        return Batch(tail + b"\n"), []

    def _hold(self, rest: bytes | bytearray, dropped: list[Dropped]) -> None:
        if self._skipping:
            return
        self._pending += rest
        if len(self._pending) > self.max_line:
            dropped.append(Dropped(f"a line longer than {self.max_line} bytes", bytes(self._pending[:200])))
            self._pending.clear()
            self._skipping = True

    @staticmethod
    def _check(data: bytes, dropped: list[Dropped]) -> Batch | None:
        # One split, then two C-level passes over the lines' ends: cheaper than counting
        # two-byte patterns over the whole chunk, and the lines are kept for readers.
        lines = data.split(b"\n")
        lines.pop()
        if all(map(bytes.startswith, lines, repeat(b"{"))) and all(map(bytes.endswith, lines, repeat(b"}"))):
            return Batch(data, lines)
        kept = []
        for line in lines:
            stripped = line.rstrip(b"\r")
            if stripped.startswith(b"{") and stripped.endswith(b"}"):
                kept.append(stripped)
            elif stripped.strip():
                dropped.append(Dropped("not a stream-json object", stripped[:200]))
        return Batch(b"".join(line + b"\n" for line in kept), kept) if kept else None


def first_message(batch: Batch, marker: bytes, kind: str) -> tuple[int, StreamMessage] | None:
    """The first line of ``batch`` whose type is ``kind``, looking only at lines holding
    ``marker``; with its index. Lines that do not parse are skipped."""
    if marker not in batch.data:
        return None
    for index, line in enumerate(batch.lines()):
        if marker in line:
            message = _parse_quietly(line)
            if message is not None and _kind_of(message) == kind:
                return index, message
    return None


def last_message(batch: Batch, marker: bytes, kind: str) -> StreamMessage | None:
    if marker not in batch.data:
        return None
    for line in reversed(batch.lines()):
        if marker in line:
            message = _parse_quietly(line)
            if message is not None and _kind_of(message) == kind:
                return message
    return None


def _parse_quietly(line: bytes) -> StreamMessage | None:
    try:
        return parse_line(line)
    except MessageError:
        return None


def _kind_of(message: StreamMessage) -> str:
    subtype = getattr(message, "subtype", None)
    return f"{message.type}/{subtype}" if message.type == "system" else message.type
