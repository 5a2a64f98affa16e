"""Waiting for room on a full disk, for what must not be dropped (a turn's closing record).

No event tells that a file system has room again. Room is most often made beside the file that
waits, by removing a file from its directory: inotify tells that at once. Room made otherwise (a
file cut short, one removed elsewhere on the disk) is found by trying again every `RETRY`. Each
failed try cuts the file it wrote to back (`hive._files.append_whole`), so changes to files are
not what is watched: they would wake the wait at once, again and again.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import trio

from hive._inotify import IN_DELETE, Inotify

RETRY = 5.0
"""How often a write that waits for room is tried again when nothing beside it changed."""


def disk_full(exc: OSError) -> bool:
    """Whether ``exc`` says the disk (or the user's quota on it) is full."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _wrote(write: Callable[[], None]) -> OSError | None:
    """Call ``write``: None if it wrote, the full disk's error if that refused it (any other
    OSError is raised)."""
    try:
        write()
    except OSError as exc:
        if not disk_full(exc):
            raise
        return exc
    return None


async def write_when_room(
    directory: Path, write: Callable[[], None], waiting: Callable[[OSError], None], retry: float = RETRY
) -> None:
    """Call ``write`` until it does not fail for a full disk (``waiting`` is told the first
    such failure): again as soon as a file in ``directory`` is removed, and at least every
    ``retry``. Any other OSError is raised, as a full disk's is if
    ``directory`` cannot be watched."""
    full = _wrote(write)
    if full is None:
        return
    waiting(full)
    with Inotify() as changes:
        changes.watch(directory, IN_DELETE)
        # Once more now that it is watched, and after each change: room made meanwhile is not missed.
        while _wrote(write) is not None:
            await trio.lowlevel.checkpoint()
            with trio.move_on_after(retry):
                await changes.changed()
