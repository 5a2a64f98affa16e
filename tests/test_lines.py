"""hive._lines: one line splitter for every socket and pipe, with one policy for an over-long line
(refused once, the rest of it dropped, the next line read on), checked against a model at any
chunk boundaries."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._lines import LineBuffer, LineCut, LineError, LineReader, LineTooLong, json_line, load_json
from hive.errors import HiveError

LIMIT = 16

# Lines around the limit (short ones, ones of exactly the limit, over-long ones), none with a newline.
lines = st.binary(max_size=3 * LIMIT).map(lambda line: line.replace(b"\n", b" "))


def expected_events(items: list[bytes], tail: bytes) -> list[object]:
    """What a reader must give for ``items`` (each ended by a newline) followed by ``tail``."""
    events: list[object] = [item if len(item) <= LIMIT else "too long" for item in items]
    if len(tail) > LIMIT:
        events.append("too long")  # refused as soon as it is over: the end then cuts nothing
    elif tail:
        events.append(("cut", tail))
    return events


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def drain(buffer: LineBuffer, events: list[object]) -> None:
    while True:
        try:
            line = buffer.next_line()
        except LineTooLong as exc:
            assert exc.limit == LIMIT
            events.append("too long")
            continue
        if line is None:
            return
        events.append(line)


@given(st.lists(lines, max_size=10), lines, st.lists(st.integers(0, 10_000), max_size=20))
def test_lines_come_out_as_they_went_in_at_any_chunk_boundaries(
    items: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    data = b"".join(item + b"\n" for item in items) + tail
    buffer = LineBuffer(LIMIT)
    events: list[object] = []
    for chunk in chunked(data, cuts):
        buffer.feed(chunk)
        drain(buffer, events)
    try:
        buffer.end()
    except LineCut as exc:
        events.append(("cut", exc.partial))
    assert events == expected_events(items, tail)


class Chunks:
    """A receive stream that gives these chunks, one a call, then the end."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._chunks:
            return b""
        chunk = self._chunks.pop(0)
        if max_bytes is not None and len(chunk) > max_bytes:
            self._chunks.insert(0, chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        return chunk


@given(st.lists(lines, max_size=8), lines, st.lists(st.integers(0, 10_000), max_size=12), st.integers(1, 40))
async def test_the_reader_reads_on_after_an_over_long_line(
    items: list[bytes], tail: bytes, cuts: list[int], read_size: int
) -> None:
    data = b"".join(item + b"\n" for item in items) + tail
    reader = LineReader(Chunks(chunked(data, cuts)), LIMIT, read_size=read_size)  # type: ignore[arg-type]
    events: list[object] = []
    while True:
        try:
            line = await reader.readline()
        except LineTooLong:
            events.append("too long")
            continue
        except LineCut as exc:
            events.append(("cut", exc.partial))
            break
        if line is None:
            break
        events.append(line)
    assert events == expected_events(items, tail)


def test_an_over_long_line_is_refused_as_soon_as_it_is_over_and_its_rest_is_dropped() -> None:
    buffer = LineBuffer(LIMIT)
    buffer.feed(b"x" * (LIMIT + 1))
    with pytest.raises(LineTooLong, match=f"line longer than {LIMIT} bytes"):
        buffer.next_line()
    buffer.feed(b"y" * 10 * LIMIT)  # more of the same line: dropped, not kept
    assert buffer.next_line() is None
    assert buffer.partial == b""
    buffer.feed(b"yyy\nnext\n")
    assert buffer.next_line() == b"next"
    buffer.end()  # nothing was cut


def test_line_errors_are_hive_errors_and_value_errors() -> None:
    for error in (LineTooLong(1), LineCut(b"x")):
        assert isinstance(error, LineError)
        assert isinstance(error, HiveError)
        assert isinstance(error, ValueError)
    assert LineCut(b"part").partial == b"part"


class _NotJson(ValueError):
    pass


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    )
)
def test_a_json_line_is_one_compact_line_that_load_json_reads_back(value: object) -> None:
    line = json_line(value)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line == json.dumps(value, separators=(",", ":")).encode() + b"\n"  # no spaces after , or :
    assert load_json(line, _NotJson) == value


@given(st.binary())
def test_load_json_raises_the_callers_error_saying_not_json(data: bytes) -> None:
    try:
        expected = json.loads(data)
    except (ValueError, RecursionError):
        with pytest.raises(_NotJson, match=r"^not JSON: "):
            load_json(data, _NotJson)
    else:
        assert load_json(data, _NotJson) == expected


def test_load_json_refuses_json_nested_too_deep_to_read() -> None:
    with pytest.raises(_NotJson, match=r"^not JSON: "):
        load_json(b"[" * 100_000 + b"]" * 100_000, _NotJson)
