"""Newline-delimited messages: the one line splitter of hive's sockets and pipes.

`LineBuffer` splits bytes as they come into lines, without I/O (the blocking bash client feeds
it from a socket); `LineReader` reads them from a Trio receive stream. A line longer than the
limit raises `LineTooLong` once, and the rest of it, however much more comes, is dropped up to
its newline: the next call gives the line after it. So where the protocol allows it (JSON-RPC,
where an error can be answered or logged and the next message taken), the reader answers an
error and keeps the connection; a protocol that cannot resync answers and closes instead. The
caller knows who sent the line and says so (``the agent sent a message longer than ...``).
A line that carries JSON is written by `json_line` and read by `load_json`.

Each byte is searched for a newline once, so a long line that arrives in many chunks costs
linear time, not a rescan per chunk. Standard library only (with ``hive.errors``): the bash
CLI client imports it before anything else; the Trio stream is only awaited, never imported.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hive.errors import HiveError

if TYPE_CHECKING:
    import trio

MAX_LINE = 1 << 20
"""The default limit of a line, newline not counted (the agent socket's)."""
READ_SIZE = 1 << 16


class LineError(HiveError, ValueError):
    """A stream's bytes are not a line within the limit."""


class LineTooLong(LineError):
    """A line is longer than its reader's limit; the next read gives the line after it."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"line longer than {limit} bytes")
        self.limit = limit


class LineCut(LineError):
    """The stream ended in the middle of a line (``partial``: what came of it)."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("connection closed in the middle of a line")
        self.partial = partial


class LineBuffer:
    """Splits the bytes fed to it into lines of at most ``limit`` bytes (newline not counted)."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self._data = bytearray()
        self._start = 0
        """Where the next line begins in ``_data``: what is before it is taken."""
        self._searched = 0
        """``_data[_start:_searched]`` holds no newline."""
        self._dropping = False
        """The buffer is the rest of an over-long line, dropped up to its newline."""

    def feed(self, data: bytes | bytearray) -> None:
        """Add what was read."""
        if self._dropping:
            end = data.find(b"\n")
            if end < 0:
                return
            self._dropping = False
            data = data[end + 1 :]
        if self._start:
            del self._data[: self._start]
            self._searched -= self._start
            self._start = 0
        self._data += data

    def next_line(self) -> bytes | None:
        """The next whole line, without its newline; None until more is fed.

        Raises `LineTooLong` for a line over the limit (once, as soon as it is known to be):
        the rest of that line is dropped as it comes.
        """
        end = self._data.find(b"\n", self._searched)
        if end < 0:
            self._searched = len(self._data)
            if self._searched - self._start > self.limit:
                self._data.clear()
                self._start = self._searched = 0
                self._dropping = True
                raise LineTooLong(self.limit)
            return None
        start, self._start, self._searched = self._start, end + 1, end + 1
        if end - start > self.limit:
            raise LineTooLong(self.limit)
        with memoryview(self._data) as view:
            return bytes(view[start:end])

    @property
    def partial(self) -> bytes:
        """What has come of a line not yet ended (nothing of one being dropped)."""
        return bytes(self._data[self._start :])

    def end(self) -> None:
        """The stream has ended: raises `LineCut` if it ended in the middle of a line."""
        if self._start < len(self._data):
            raise LineCut(self.partial)


class LineReader:
    """The lines of a Trio receive stream, each of at most ``limit`` bytes (see `LineBuffer`)."""

    def __init__(
        self, stream: trio.abc.ReceiveStream, limit: int = MAX_LINE, *, read_size: int = READ_SIZE
    ) -> None:
        self._stream = stream
        self._buffer = LineBuffer(limit)
        self._read_size = read_size

    @property
    def limit(self) -> int:
        """The longest line this reader takes, in bytes, its newline not counted."""
        return self._buffer.limit

    async def readline(self) -> bytes | None:
        """The next line without its newline, or None at a clean end of stream.

        Raises `LineTooLong` for an over-long line (the next call reads on after it), `LineCut`
        when the stream ends inside a line, and whatever the stream raises.
        """
        while (line := self._buffer.next_line()) is None:
            data = await self._stream.receive_some(self._read_size)
            if not data:
                self._buffer.end()
                return None
            self._buffer.feed(data)
        return line


def json_line(data: Any) -> bytes:
    """``data`` (JSON-ready) as one compact line of JSON, its newline included."""
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


def load_json(line: bytes, error: Callable[[str], Exception]) -> Any:
    """What ``line`` holds as JSON; ``error("not JSON: ...")``, saying why, if it holds none (or
    nests too deep to be read)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise error(f"not JSON: {str(exc)[:200]}") from None
