"""Where a turn's stream goes: the Sink protocol and its JSONL, in-memory and fan-out sinks."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive._files import open_append
from hive.sink._batch import Batch
from hive.sink._messages import StreamMessage
from hive.sink._usage import ContextUsage


class Sink(Protocol):
    """Receives a turn's stream-json lines in order, and the context usage beside them."""

    async def write(self, batch: Batch) -> None: ...

    async def context_usage(self, usage: ContextUsage) -> None: ...


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
    def to_path(cls, path: str | os.PathLike[str]) -> JsonlSink:
        return cls(open_append(Path(path)))

    async def write(self, batch: Batch) -> None:
        async with self._lock:
            await self._stream.send_all(batch.data)

    async def context_usage(self, usage: ContextUsage) -> None:
        """Not part of the stream-json shape, so not written."""

    async def aclose(self) -> None:
        await self._stream.aclose()


@attrs.define(eq=False)
class MemorySink:
    """Keeps everything, for tests and for callers that read the turn afterwards."""

    batches: list[Batch] = attrs.field(factory=list)
    usages: list[ContextUsage] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def write(self, batch: Batch) -> None:
        self.batches.append(batch)
        self._notify()

    async def context_usage(self, usage: ContextUsage) -> None:
        self.usages.append(usage)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    @property
    def data(self) -> bytes:
        return b"".join(b.data for b in self.batches)

    def lines(self) -> list[bytes]:
        return [line for b in self.batches for line in b.lines()]

    def messages(self) -> list[StreamMessage]:
        return [m for b in self.batches for m in b.messages()]

    def types(self) -> list[str]:
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
        for sink in self.sinks:
            await sink.write(batch)

    async def context_usage(self, usage: ContextUsage) -> None:
        for sink in self.sinks:
            await sink.context_usage(usage)
