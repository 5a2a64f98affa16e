"""Making what the daemon wrote durable: fsync of each file, then of the directories that hold
their names (fsync(2): a file's name is on disk only once its directory has been synced).

The syncs that several callers ask for while a group is being made go together in the next
group, each file and directory once: a burst of `run` calls costs a few disk flushes, not two
each.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

import attrs

from hive._files import fsync_dir, open_regular
from hive.bash._batches import Batcher

log = logging.getLogger(__name__)


def make_durable(paths: Iterable[Path], directories: Iterable[Path] = ()) -> None:
    """fsync each of these regular files that is there (a symlink planted there is not
    followed), then each of ``directories``, in order (blocking). A failure is logged."""
    for path in paths:
        try:
            fd = open_regular(path)
        except OSError as exc:
            log.warning("cannot make %s durable: %s", path, exc)
            continue
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:
                log.warning("cannot make %s durable: %s", path, exc)
            finally:
                os.close(fd)
    for directory in directories:
        try:
            fsync_dir(directory)
        except OSError as exc:
            log.warning("cannot make the names in %s durable: %s", directory, exc)


@attrs.define(eq=False)
class GroupSync:
    """fsyncs asked for together, made together: `sync` returns once its files and directories
    are durable. One group at a time (a single lane), so that a group that took a caller's
    paths has been synced before that caller's turn comes."""

    trips: Batcher = attrs.field(factory=lambda: Batcher(lanes=1))
    _files: dict[Path, None] = attrs.field(factory=dict)
    _directories: dict[Path, None] = attrs.field(factory=dict)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    async def sync(self, files: Iterable[Path], directories: Iterable[Path]) -> None:
        """Make ``files``, then ``directories``, durable, with whatever else is asked for meanwhile."""
        with self._lock:
            self._files.update(dict.fromkeys(files))
            self._directories.update(dict.fromkeys(directories))
        await self.trips.run(self._flush)

    def _flush(self) -> None:
        with self._lock:
            files, self._files = self._files, {}
            directories, self._directories = self._directories, {}
        if files or directories:
            make_durable(files, directories)
