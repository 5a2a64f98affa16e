"""Following a file another process appends to (``hive agent log --follow``), woken by inotify.

The directory is watched rather than the file, so a file that does not exist yet, or is
replaced, is followed all the same. Each wake-up reads what was appended since the last; a file
that got shorter (replaced, truncated) is read again from its start.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import AsyncGenerator
from pathlib import Path

import trio

from hive._files import open_regular

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x002
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_MASK = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE
READ_SIZE = 1 << 16


class _Inotify:
    def __init__(self, directory: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"cannot watch {directory}: {os.strerror(code)}")
        if libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) < 0:
            code = ctypes.get_errno()
            os.close(fd)
            raise OSError(code, f"cannot watch {directory}: {os.strerror(code)}")
        self.fd = fd

    async def wait(self) -> None:
        """Until something changed in the directory since the last wait."""
        while True:
            try:
                if os.read(self.fd, 4096 * 4):
                    return
            except BlockingIOError:
                pass
            await trio.lowlevel.wait_readable(self.fd)

    def close(self) -> None:
        os.close(self.fd)


async def follow_lines(path: Path) -> AsyncGenerator[bytes, None]:
    """Every whole line of ``path``, from its start, then each line appended to it, forever."""
    watcher = _Inotify(path.parent)
    try:
        offset = 0
        partial = b""
        while True:
            chunk, offset, restarted = _read_from(path, offset)
            if restarted:
                partial = b""
            if chunk:
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    yield line
            else:
                await watcher.wait()
    finally:
        watcher.close()


def _read_from(path: Path, offset: int) -> tuple[bytes, int, bool]:
    """What ``path`` holds past ``offset``; from 0 again if it got shorter."""
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
