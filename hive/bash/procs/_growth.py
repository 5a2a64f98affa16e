"""Which tasks' output files were written since the last look: one inotify instance for all of them.

The output cap is checked when a task's output grows, woken by the kernel, not once an interval:
a fast writer passes the cap by what it writes between the crossing and the check, and the
file size limit (which bounds each file, not the two together) is only the backstop. Where no
instance or watch can be made (out of inotify instances or watches), the interval's check holds
the cap alone; the log says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio

from hive._inotify import IN_MODIFY, Inotify

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class GrowthWatch:
    """The output files of some tasks (by serial), watched for writes."""

    _inotify: Inotify | None = None
    _serials: dict[int, str] = attrs.field(factory=dict)
    """Watch descriptor -> the serial of the task whose file it watches."""
    _watches: dict[str, list[int]] = attrs.field(factory=dict)
    _due: set[str] = attrs.field(factory=set)
    """Tasks added since the last look: looked at once whatever their files saw."""
    _parked: trio.CancelScope | None = None
    _warned: bool = False

    def add(self, serial: str, paths: Iterable[Path]) -> None:
        """Watch these files of the task ``serial``; it is looked at once at the next `changed`."""
        inotify = self._instance()
        watches = self._watches.setdefault(serial, [])
        if inotify is not None:
            for path in paths:
                try:
                    wd = inotify.watch(path, IN_MODIFY)
                except OSError as exc:
                    self._cannot(exc)
                    continue
                self._serials[wd] = serial
                watches.append(wd)
        self._due.add(serial)
        if self._parked is not None:
            self._parked.cancel()

    def remove(self, serial: str) -> None:
        self._due.discard(serial)
        for wd in self._watches.pop(serial, []):
            if self._serials.get(wd) == serial:
                del self._serials[wd]
                if self._inotify is not None:
                    self._inotify.unwatch(wd)

    async def changed(self) -> set[str]:
        """Until a watched task's files were written (or a task was added): those tasks."""
        while True:
            found = set(self._due)
            if self._inotify is not None:
                wds = self._inotify.drain_watches()
                if wds is None:
                    found.update(self._watches)
                else:
                    found.update(self._serials[wd] for wd in wds if wd in self._serials)
            self._due.clear()
            if found:
                return found
            with trio.CancelScope() as self._parked:
                if self._inotify is None:
                    await trio.sleep_forever()
                await trio.lowlevel.wait_readable(self._inotify.fd)
            self._parked = None

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()

    def _instance(self) -> Inotify | None:
        if self._inotify is None and not self._warned:
            try:
                self._inotify = Inotify()
            except OSError as exc:
                self._cannot(exc)
        return self._inotify

    def _cannot(self, exc: OSError) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "cannot watch task output for the output cap (%s): it is checked once an interval instead",
                exc,
            )
