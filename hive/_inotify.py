"""Waiting on a file's changes with inotify: the one watcher of hive (a task cgroup's events, a
turn log followed, a task's output followed).

An `Inotify` is an inotify instance (non-blocking, closed on exec) and the watches added to it;
`changed` returns once anything watched has changed since the last call, woken by the kernel
through Trio, never by polling. Events are not told apart: a caller looks again at what it
watches, so an event is never lost in a queue that overflowed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path
from types import TracebackType

import trio

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200

_libc = ctypes.CDLL(None, use_errno=True)


def _error(what: Path | None) -> OSError:
    code = ctypes.get_errno()
    if what is None:
        return OSError(code, f"cannot start an inotify watch: {os.strerror(code)}")
    return OSError(code, f"cannot watch {what}: {os.strerror(code)}", str(what))


class Inotify:
    """An inotify instance and its watches; raises `OSError` (out of instances or watches, a
    path that is gone) where the kernel refuses."""

    def __init__(self) -> None:
        fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise _error(None)
        self.fd: int = fd

    def watch(self, path: Path, mask: int) -> None:
        """Watch ``path`` (a file or a directory) for the events in ``mask``."""
        if _libc.inotify_add_watch(self.fd, os.fsencode(path), mask) < 0:
            raise _error(path)

    async def changed(self) -> None:
        """Until something watched has changed since the last call (or since the watch)."""
        while not self.drain():
            await trio.lowlevel.wait_readable(self.fd)

    def drain(self) -> bool:
        """Read every event queued; whether there was any."""
        found = False
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, 1 << 14):
                found = True
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Inotify:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
