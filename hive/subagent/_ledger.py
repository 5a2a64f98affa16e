"""The session records of one daemon: in memory, and on disk as far as the disk lets them be."""

from __future__ import annotations

import logging

import attrs

from hive.subagent._session_records import SessionRecord
from hive.subagent._store import Store

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class Ledger:
    """Every session's record by name; ``save`` writes one, and any whose last save failed."""

    store: Store
    records: dict[str, SessionRecord] = attrs.field(factory=dict)
    _unsaved: set[str] = attrs.field(factory=set)
    """The names whose record in memory is newer than on disk (a save failed: ENOSPC, EIO)."""

    def save(self, record: SessionRecord) -> bool:
        """Write ``record``; a failure (a full disk, an I/O error) is logged once, the record kept in
        memory and written with the next save that works. Whether it is on disk now."""
        try:
            self.store.save(record)
        except OSError as exc:
            if not self._unsaved:
                log.error(  # noqa: TRY400 - the message says what to do
                    "cannot save subagent records in %s (%s): they are kept in memory and written once "
                    "a save works again; free space there (or fix the disk)",
                    self.store.sessions,
                    exc,
                )
            self._unsaved.add(record.name)
            return False
        was_failing = bool(self._unsaved)
        self._unsaved.discard(record.name)
        for name in sorted(self._unsaved):
            other = self.records.get(name)
            try:
                if other is not None:
                    self.store.save(other)
            except OSError:
                return True
            self._unsaved.discard(name)
        if was_failing:
            log.info("subagent records are saved again in %s", self.store.sessions)
        return True
