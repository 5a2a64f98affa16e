"""Following a file another process appends to (``hive agent log --follow``), woken by inotify.

The directory is watched rather than the file, so a file that does not exist yet, or is
replaced, is followed all the same. Each wake-up reads what was appended since the last; a file
that got shorter (replaced, truncated) is read again from its start.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path

from hive._files import open_regular
from hive._inotify import IN_CLOSE_WRITE, IN_CREATE, IN_MODIFY, IN_MOVED_TO, Inotify

_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
READ_SIZE = 1 << 16


async def follow_lines(path: Path) -> AsyncGenerator[bytes, None]:
    """Every whole line of ``path``, from its start, then each line appended to it, forever."""
    watcher = Inotify()
    try:
        watcher.watch(path.parent, _MASK)
        offset = 0
        partial = b""
        while True:
            chunk, offset, restarted = read_appended(path, offset)
            if restarted:
                partial = b""
            if chunk:
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    yield line
            else:
                await watcher.changed()
    finally:
        watcher.close()


def read_appended(path: Path, offset: int) -> tuple[bytes, int, bool]:
    """What ``path`` holds past ``offset`` (at most `READ_SIZE`), the offset after it, and
    whether it was read from 0 again because it got shorter (blocking)."""
    fd = open_regular(path)
    if fd is None:
        return b"", 0, offset > 0
    try:
        size = os.fstat(fd).st_size
        restarted = size < offset
        if restarted:
            offset = 0
        chunk = os.pread(fd, READ_SIZE, offset)
    finally:
        os.close(fd)
    return chunk, offset + len(chunk), restarted
