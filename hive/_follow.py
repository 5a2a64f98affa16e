"""Following a file another process appends to, line by line: the one follow-a-file reader of hive
(``hive agent log --follow``, the fleet page's log and its turn chart).

A `FollowedFile` reads what was appended since its last read, its whole lines each once; a file
replaced or cut shorter is read anew, from its start or from its last bytes. `follow_lines` is
woken by inotify on the file's directory, so a file that does not exist yet, or is replaced, is
followed all the same.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path

import attrs

from hive._files import open_regular
from hive._inotify import IN_CLOSE_WRITE, IN_CREATE, IN_MODIFY, IN_MOVED_TO, Inotify

_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
READ_SIZE = 1 << 16


@attrs.frozen
class Appended:
    """One read of a followed file."""

    lines: list[bytes]
    """The whole lines it ended (a line still being written comes with the read that ends it)."""
    read: int
    """How many bytes it read: 0 at the file's end."""
    restarted: bool
    """The file is not the one read before (first read, replaced, cut shorter, or gone)."""


@attrs.define
class FollowedFile:
    """The file at ``path``, read as it grows (blocking reads; a file not there reads as empty)."""

    path: Path
    tail: int | None = None
    """Where a file is first read from: its last ``tail`` bytes (the line they cut is left out);
    None: its start."""
    _inode: int | None = None
    _offset: int = 0
    _partial: bytes = b""
    _cut: bool = False

    def read(self, most: int = READ_SIZE) -> Appended:
        """What was appended since the last read, at most ``most`` bytes of it."""
        fd = open_regular(self.path)
        if fd is None:
            restarted, self._inode = self._inode is not None, None
            return Appended([], 0, restarted)
        try:
            found = os.fstat(fd)
            restarted = found.st_ino != self._inode or found.st_size < self._offset
            if restarted:
                start = 0 if self.tail is None else max(0, found.st_size - self.tail)
                self._inode, self._offset, self._partial, self._cut = found.st_ino, start, b"", start > 0
            data = os.pread(fd, most, self._offset)
        finally:
            os.close(fd)
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        if self._cut and lines:
            lines, self._cut = lines[1:], False
        return Appended(lines, len(data), restarted)


async def follow_lines(path: Path) -> AsyncGenerator[bytes, None]:
    """Every whole line of ``path``, from its start, then each line appended to it, forever."""
    followed, watcher = FollowedFile(path), Inotify()
    try:
        watcher.watch(path.parent, _MASK)
        while True:
            appended = followed.read()
            for line in appended.lines:
                yield line
            if not appended.read:
                await watcher.changed()
    finally:
        watcher.close()
