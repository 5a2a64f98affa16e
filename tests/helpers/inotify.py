"""Waiting for another process's files to change, on inotify (through ctypes: no dependency).

A fake agent's record, a turn log, a loose end: files that another process writes, with nothing
to await but the kernel's word that a directory changed. `wait_until` re-checks a condition on
each such word, never on a timer.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import trio

T = TypeVar("T")

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE

_libc = ctypes.CDLL(None, use_errno=True)


class DirectoryWatch:
    """An inotify descriptor watching directories for any change to what they hold.

    A directory that does not exist yet is watched through its nearest existing ancestor, and
    watched itself from the first `arm` after it appears.
    """

    def __init__(self, *directories: Path) -> None:
        self.directories = [Path(d).absolute() for d in directories]
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")

    def arm(self) -> None:
        """Watch each directory, or its nearest existing ancestor while it is missing."""
        for directory in self.directories:
            path = directory
            while _libc.inotify_add_watch(self.fd, os.fsencode(path), CHANGES) < 0:
                if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR) or path == path.parent:
                    raise OSError(ctypes.get_errno(), f"cannot watch {path}")
                path = path.parent

    def drain(self) -> None:
        """Forget the changes reported so far."""
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    async def changed(self) -> None:
        """Wait for the next change."""
        await trio.lowlevel.wait_readable(self.fd)
        self.drain()

    def changed_within(self, seconds: float) -> bool:
        """Block until the next change, for at most ``seconds``; whether one came."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        if not poller.poll(max(0.0, seconds) * 1000):
            return False
        self.drain()
        return True

    def close(self) -> None:
        """Close the descriptor (and so every watch)."""
        os.close(self.fd)


@contextmanager
def watching(*directories: Path) -> Iterator[DirectoryWatch]:
    """A `DirectoryWatch` for the duration of the block."""
    watch = DirectoryWatch(*directories)
    try:
        yield watch
    finally:
        watch.close()


async def wait_until(check: Callable[[], T | None], *directories: Path) -> T:
    """``check()``'s first true value, checked again whenever something in ``directories`` changes.

    The watch is armed before each check, so a change between a check and the wait still wakes it.
    """
    with watching(*directories) as watch:
        while True:
            watch.arm()
            if found := check():
                return found
            await watch.changed()


def wait_until_blocking(check: Callable[[], T | None], *directories: Path, timeout: float) -> T:
    """`wait_until` for code outside Trio: blocks, and fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with watching(*directories) as watch:
        while True:
            watch.arm()
            if found := check():
                return found
            if not watch.changed_within(deadline - time.monotonic()):
                raise TimeoutError(
                    f"nothing in {[str(d) for d in directories]} came to pass within {timeout} s"
                )
