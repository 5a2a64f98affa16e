"""A task's output read from an offset, and waited for as it grows (``status`` with
``stdout_offset`` / ``stderr_offset``).

A read takes at most `MAX_NEW_BYTES` from the offset and ends on a UTF-8 character boundary:
a character cut by the cap, or not yet whole in a file still being written, is left for the
next read. So the ``next`` offsets, followed from 0, cut the file into pieces whose texts join
into the whole file's text, however the writes fell. Reading consumes nothing: the same offset
reads the same bytes again.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import attrs
import trio

from hive._files import open_regular
from hive._inotify import IN_MODIFY, Inotify
from hive.bash._batches import Batcher
from hive.bash._errors import BadArgument
from hive.bash._task import Task
from hive.bash.files._store import Tail, TaskStore, read_tail

MAX_NEW_BYTES = 64 * 1024
"""The most bytes of one stream one answer carries."""

STREAMS = ("stdout", "stderr")

GrownCheck = Callable[[Mapping[Path, int]], Awaitable[bool]]
"""Whether any of the paths is longer than its offset (looked at in a worker thread)."""


class OffsetPastEnd(BadArgument):
    """An offset beyond what the stream holds."""


@attrs.frozen
class NewOutput:
    """What a stream holds past an offset."""

    stream: str
    offset: int
    text: str
    next: int
    """The offset to pass next time: past the bytes ``text`` decodes."""
    size: int
    """The stream's size when it was read."""

    @property
    def more(self) -> bool:
        """Whether the stream held more than this answer carries."""
        return self.next < self.size


def stream_size(path: Path) -> int:
    """The size of an output file; 0 where it is missing or not a regular file."""
    fd = open_regular(path)
    if fd is None:
        return 0
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def check_offset(stream: str, offset: int, size: int) -> None:
    if offset > size:
        raise OffsetPastEnd(
            f"{stream}_offset {offset} is past the end of the task's {stream}, which is {size} bytes "
            f"long; pass {size} to read what comes next, or 0 to read it from its start"
        )


def read_new(stream: str, path: Path, offset: int, *, final: bool) -> NewOutput:
    """What ``path`` holds past ``offset`` (blocking). ``final``: nothing more will be written,
    so a character left incomplete at the end is decoded (replaced) rather than held back."""
    fd = open_regular(path)
    if fd is None:
        check_offset(stream, offset, 0)
        return NewOutput(stream, offset, "", offset, 0)
    try:
        size = os.fstat(fd).st_size
        check_offset(stream, offset, size)
        data = os.pread(fd, MAX_NEW_BYTES, offset)
    finally:
        os.close(fd)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    whole = final and offset + len(data) >= size
    text = decoder.decode(data, final=whole)
    held_back = len(decoder.getstate()[0])
    return NewOutput(stream, offset, text, offset + len(data) - held_back, max(size, offset + len(data)))


async def until_grown(paths: Mapping[Path, int], grown: GrownCheck) -> None:
    """Until one of ``paths`` is longer than its offset; woken by inotify. Where no watch can be
    made (out of inotify instances or watches), never: the caller's other waits decide."""
    try:
        watcher = Inotify()
    except OSError:
        await trio.sleep_forever()
    with watcher:
        try:
            for path in paths:
                watcher.watch(path, IN_MODIFY)
        except OSError:
            await trio.sleep_forever()
        # Watched before the first look, so that no write between the two goes unseen.
        while not await grown(paths):
            await watcher.changed()


def stream_path(store: TaskStore, task_id: str, stream: str) -> Path:
    """The file of a task's ``stdout`` or ``stderr``."""
    return store.out_path(task_id) if stream == "stdout" else store.err_path(task_id)


async def read_tails(store: TaskStore, reads: Batcher, task_id: str) -> tuple[Tail, Tail]:
    """The last 4 KiB of a task's stdout and stderr, read in a worker thread."""
    return await reads.run(lambda: (read_tail(store.out_path(task_id)), read_tail(store.err_path(task_id))))


async def read_past(
    store: TaskStore, reads: Batcher, task: Task, offsets: Mapping[str, int]
) -> list[NewOutput]:
    """What each stream named in ``offsets`` holds past its offset (read in a worker thread)."""
    final = task.final
    wanted = [(stream, stream_path(store, task.id, stream), offset) for stream, offset in offsets.items()]
    return await reads.run(
        lambda: [read_new(stream, path, offset, final=final) for stream, path, offset in wanted]
    )


async def wait_grown(store: TaskStore, reads: Batcher, task: Task, offsets: Mapping[str, int]) -> None:
    """Until a stream named in ``offsets`` has bytes past its offset, or the task has ended (the
    caller's cancel scope bounds the wait); an offset past its stream's end is refused (`OffsetPastEnd`)."""
    paths = {stream_path(store, task.id, stream): offset for stream, offset in offsets.items()}

    async def grown(paths: Mapping[Path, int]) -> bool:
        sizes = await reads.run(lambda: [stream_size(path) for path in paths])
        return any(size > offset for size, offset in zip(sizes, paths.values(), strict=True))

    sizes = await reads.run(lambda: [stream_size(path) for path in paths])
    for (stream, offset), size in zip(offsets.items(), sizes, strict=True):
        check_offset(stream, offset, size)
    if task.final or any(size > offset for size, offset in zip(sizes, offsets.values(), strict=True)):
        return
    async with trio.open_nursery() as nursery:

        async def ended() -> None:
            await task.ended.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(ended)
        await until_grown(paths, grown)
        nursery.cancel_scope.cancel()
