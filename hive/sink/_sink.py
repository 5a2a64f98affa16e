"""Where a turn's stream goes: the Sink protocol and its JSONL, in-memory and fan-out sinks."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive._files import append_whole, open_append
from hive.sink._batch import Batch
from hive.sink._messages import StreamMessage
from hive.sink._usage import ContextUsage

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Receives a turn's stream-json lines in order, and the context usage beside them."""

    async def write(self, batch: Batch) -> None:
        """Take the next lines of the stream."""
        ...

    async def context_usage(self, usage: ContextUsage) -> None:
        """Take how full the agent's context window is now."""
        ...


class JsonlSink:
    """Writes each batch to a file descriptor as it comes: one message a line, nothing held back.

    ``fd`` is owned by the sink (closed by ``aclose``); stdout for example as
    ``JsonlSink(os.dup(1))``. The descriptor is written through Trio, so a slow reader of a
    pipe blocks only this sink, never the event loop.
    """

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)
        self._lock = trio.Lock()

    @classmethod
    def to_path(cls, path: str | os.PathLike[str]) -> JsonlFile:
        """A sink appending to the file at ``path`` (see :class:`JsonlFile`)."""
        return JsonlFile.open(Path(path), known_as="the turn log", meanwhile="the turn goes on unlogged")

    async def write(self, batch: Batch) -> None:
        """Write ``batch`` whole before the next (writes from several tasks do not interleave)."""
        async with self._lock:
            await self._stream.send_all(batch.data)

    async def context_usage(self, usage: ContextUsage) -> None:
        """Not part of the stream-json shape, so not written."""

    async def aclose(self) -> None:
        """Close the descriptor."""
        await self._stream.aclose()


class JsonlFile:
    """Appends each batch to a log file, whole or not at all: a full disk (ENOSPC) or a failing
    one (EIO) cuts no line in two, is reported once, and stops nothing; the writes go on, and
    the next that works is reported too.

    The file is opened as every state file is (created 0600, never through a symlink: see
    :mod:`hive._files`); an OSError from that is the caller's.
    """

    def __init__(self, path: Path, fd: int, *, known_as: str = "the log", meanwhile: str = "") -> None:
        self.path = path
        self._fd = fd
        self._failed = False
        self._known_as = known_as
        self._meanwhile = meanwhile or "what it would hold is not kept until it can be written"

    @classmethod
    def open(cls, path: Path, *, known_as: str = "the log", meanwhile: str = "") -> JsonlFile:
        """Open ``path`` to append to; ``known_as`` names it and ``meanwhile`` says what happens
        to the lines while it cannot be written, in the message that reports it."""
        return cls(path, open_append(path), known_as=known_as, meanwhile=meanwhile)

    async def write(self, batch: Batch) -> None:
        """Append ``batch`` (see ``write_bytes``)."""
        await self.write_bytes(batch.data)

    async def write_bytes(self, data: bytes) -> None:
        """Append ``data`` whole, or not at all if the disk refuses it (reported once)."""
        await trio.lowlevel.checkpoint()
        try:
            self.append(data)
        except OSError as exc:
            self.refused(exc)

    def append(self, data: bytes) -> None:
        """Append ``data`` whole, or raise the disk's OSError with none of it written (for a
        caller that will not drop it: tell `refused` if it gives up)."""
        append_whole(self._fd, data)
        if self._failed:
            log.warning(
                "%s %s can be written again; what came meanwhile is not in it", self._known_as, self.path
            )
        self._failed = False

    def refused(self, exc: OSError) -> None:
        """Report that a write was refused with ``exc`` and dropped (once, until one works)."""
        if not self._failed:
            log.error("cannot write %s %s (%s); %s", self._known_as, self.path, exc, self._meanwhile)
        self._failed = True

    async def sync(self) -> None:
        """Make what was appended so far durable (fsync, in a worker thread, which the caller
        waits for: close the file only once it has returned); a failure is reported as a write's."""
        try:
            await trio.to_thread.run_sync(os.fsync, self._fd)
        except OSError as exc:
            log.error("cannot make %s %s durable (%s)", self._known_as, self.path, exc)  # noqa: TRY400

    async def context_usage(self, usage: ContextUsage) -> None:
        """Not part of the stream-json shape, so not written."""

    async def aclose(self) -> None:
        """Close the file."""
        os.close(self._fd)


@attrs.define(eq=False)
class MemorySink:
    """Keeps everything, for tests and for callers that read the turn afterwards."""

    batches: list[Batch] = attrs.field(factory=list)
    usages: list[ContextUsage] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def write(self, batch: Batch) -> None:
        """Keep ``batch``."""
        self.batches.append(batch)
        self._notify()

    async def context_usage(self, usage: ContextUsage) -> None:
        """Keep ``usage``."""
        self.usages.append(usage)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    @property
    def data(self) -> bytes:
        """Every line so far, as written."""
        return b"".join(b.data for b in self.batches)

    def lines(self) -> list[bytes]:
        """Every line so far, without its newline."""
        return [line for b in self.batches for line in b.lines()]

    def messages(self) -> list[StreamMessage]:
        """Every line so far, as a typed message."""
        return [m for b in self.batches for m in b.messages()]

    def types(self) -> list[str]:
        """The ``type`` of every message so far."""
        return [m.type for m in self.messages()]

    async def wait_for_lines(self, count: int) -> None:
        """Wait until at least ``count`` lines have arrived."""
        while sum(len(b) for b in self.batches) < count:
            await self._changed.wait()


@attrs.define(eq=False)
class FanOut:
    """Hands everything to each of several sinks, in order."""

    sinks: Sequence[Sink]

    async def write(self, batch: Batch) -> None:
        """Hand ``batch`` to each sink in turn."""
        for sink in self.sinks:
            await sink.write(batch)

    async def context_usage(self, usage: ContextUsage) -> None:
        """Hand ``usage`` to each sink in turn."""
        for sink in self.sinks:
            await sink.context_usage(usage)
