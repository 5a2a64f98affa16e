"""Waiting on a file's changes with inotify: the one watcher of hive (a task cgroup's events, a
turn log followed, a task's output followed).

An `Inotify` is an inotify instance (non-blocking, closed on exec) and the watches added to it;
`changed` returns once anything watched has changed since the last call, woken by the kernel
through Trio, never by polling. Events are not told apart: a caller looks again at what it
watches, so an event is never lost in a queue that overflowed. A caller with many watches on
one instance asks `drain_watches` which of them saw events (all of them, after an overflow).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from pathlib import Path
from types import TracebackType

import trio

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_Q_OVERFLOW = 0x4000

_EVENT = struct.Struct("iIII")
"""The fixed part of a ``struct inotify_event``: wd, mask, cookie, and the length of the name after it."""

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

    def watch(self, path: Path, mask: int) -> int:
        """Watch ``path`` (a file or a directory) for the events in ``mask``; the watch's descriptor."""
        wd: int = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise _error(path)
        return wd

    def unwatch(self, wd: int) -> None:
        """Stop the watch ``wd`` (nothing if it is gone already: its file was deleted)."""
        _libc.inotify_rm_watch(self.fd, wd)

    def drain_watches(self) -> set[int] | None:
        """Read every event queued: the descriptors of the watches they were on (None: overflowed)."""
        found: set[int] = set()
        overflowed = False
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self.fd, 1 << 14):
                offset = 0
                while offset < len(data):
                    wd, mask, _cookie, name_length = _EVENT.unpack_from(data, offset)
                    offset += _EVENT.size + name_length
                    overflowed = overflowed or bool(mask & IN_Q_OVERFLOW)
                    found.add(wd)
        return None if overflowed else found

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
