"""Runs of stream-json lines, exactly as the agent wrote them, and the framer that cuts them.

The hot path touches no line one by one: a chunk read from the agent is cut at its last
newline, checked for shape with a few byte counts, and handed on whole. Only a chunk that
fails the check is split, and only the lines a reader asks for are parsed.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Iterator, Mapping
from itertools import compress, repeat

import attrs

from hive.sink._messages import JsonObject, StreamMessage
from hive.sink._stream_json import MessageError, encode_message, parse_line, structure_message

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
        """The lines as JSON objects, untyped."""
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
        """A batch of ``messages``, one line each."""
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
        """The whole lines ``chunk`` completes (None if none), and what of it was dropped."""
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
            stripped = line.strip(b" \t\r")  # JSON's whitespace around the object
            if stripped.startswith(b"{") and stripped.endswith(b"}"):
                kept.append(stripped)
            elif stripped.strip():
                dropped.append(Dropped("not a stream-json object", stripped[:200]))
        return Batch(b"".join(line + b"\n" for line in kept), kept) if kept else None


ESCAPE = b"\\u"
"""How JSON writes a character other than as itself (a letter of a type, say): ``\\uXXXX``."""
_TYPED = {
    kind: b'{"type":"' + kind.encode() + b'"'
    for kind in ("stream_event", "assistant", "user", "system", "result")
}
"""The first bytes of a line of each type as claude writes most of its lines: compact, ``type`` first."""


def typed_lines(batch: Batch, markers: Mapping[str, bytes]) -> Iterator[tuple[int, str, JsonObject]]:
    """The lines of ``batch`` of the kinds ``markers`` names (``type``, or ``system/<subtype>``),
    by what their JSON says whatever its spelling (whitespace, key order, escapes), in order:
    each with its index, its kind and its object. ``markers`` gives for each kind a JSON string
    (its quotes included) that a line of that kind holds, e.g. ``{"result": b'"result"'}``.

    Only lines that may be of those kinds are parsed. Left out unparsed: a line that begins
    with another type as claude writes it (``{"type":"user"``: its type is that one, as no JSON
    writer repeats a key), and a line holding no marker as written and no ``\\u`` escape (the
    only other way JSON can spell a letter; whitespace, key order and the other escapes cannot
    change how a string of letters is written). So no line of those kinds, in any spelling,
    is left out. The pass over all the lines is C-level; most are left out by their first bytes.
    """
    lines = batch.lines() if batch.data else []
    heads = {kind.partition("/")[0] for kind in markers}
    others = tuple(prefix for name, prefix in _TYPED.items() if name not in heads)
    needles = (*markers.values(), ESCAPE)
    for index in compress(
        range(len(lines)), map(operator.not_, map(bytes.startswith, lines, repeat(others)))
    ):
        line = lines[index]
        if any(needle in line for needle in needles):
            kind, obj = kind_of_line(line)
            if kind is not None and obj is not None and kind in markers:
                yield index, kind, obj


def kind_of_line(line: bytes) -> tuple[str | None, JsonObject | None]:
    """A line's kind (``type``, or ``system/<subtype>``) by what its JSON says, whatever its
    spelling, and its object; (None, None) if it is not a JSON object."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(obj, dict):
        return None, None
    kind = obj.get("type")
    if not isinstance(kind, str):
        return None, obj
    return (f"system/{obj.get('subtype')}" if kind == "system" else kind), obj


def first_message(batch: Batch, marker: bytes, kind: str) -> tuple[int, StreamMessage] | None:
    """The first line of ``batch`` whose type is ``kind``, whatever its spelling, with its
    index (see ``typed_lines``: ``marker`` is a JSON string such a line holds, e.g.
    ``b'"result"'``). Lines that do not parse are skipped."""
    for index, _, obj in typed_lines(batch, {kind: marker}):
        message = structured(obj)
        if message is not None:
            return index, message
    return None


def last_message(batch: Batch, marker: bytes, kind: str) -> StreamMessage | None:
    """As ``first_message``, the last such line."""
    for _, _, obj in reversed(list(typed_lines(batch, {kind: marker}))):
        message = structured(obj)
        if message is not None:
            return message
    return None


def structured(obj: JsonObject) -> StreamMessage | None:
    """The typed message of a parsed line, or None if it is malformed."""
    try:
        return structure_message(obj)
    except MessageError:
        return None
