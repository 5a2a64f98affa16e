"""A task the daemon knows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from hive.bash.ends._owed import Key
from hive.bash.files._records import OwedWake, TaskRecord

if TYPE_CHECKING:
    from hive.telemetry import TaskTrace


@attrs.define(eq=False)
class Task:
    """A task the daemon knows, with the in-memory state that its record does not hold.

    Whether its end is owed, and who holds it, is the owed-end model's (see `hive.bash.ends._ledger`).
    """

    record: TaskRecord
    ended: trio.Event = attrs.field(factory=trio.Event)
    exited: trio.Event = attrs.field(factory=trio.Event)
    recorded: trio.Event = attrs.field(factory=trio.Event)
    """Set once its final record is written (not yet fsynced: see `Ledger.sync_ends`), or its
    failure to be is noted."""
    durable: trio.Event = attrs.field(factory=trio.Event)
    """Set once the record and loose end saved as it started are durable (or could not be made
    so: the log says why); its caller is told it started only then."""
    supervisor: trio.Nursery | None = None
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    record_dirty: bool = False
    owed_wake: OwedWake | None = None
    """The wake for this task's end, composed once when it ends."""
    trace: TaskTrace | None = None
    """Its span, from its start (or its re-adoption) to its end, where telemetry is exported."""
    parent: str | None = None
    """The ``traceparent`` its ``run`` call came with (the turn's): its span's parent. Not kept
    on disk: a task a restarted daemon adopts starts a trace of its own."""

    @property
    def id(self) -> str:
        """Its id: the name it was given, or the one the daemon drew."""
        return self.record.id

    @property
    def key(self) -> Key:
        """The run: its id and serial (its end id is ``<id>:<serial>``)."""
        return (self.record.id, self.record.serial)

    @property
    def final(self) -> bool:
        """Whether it has ended (its state is one no other follows)."""
        return self.record.state.final
