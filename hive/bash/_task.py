"""A task the daemon knows, and the settings its tasks run with."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from hive.bash._model import HeldBy
from hive.bash._owed import Key
from hive.bash._records import OwedWake, TaskRecord

if TYPE_CHECKING:
    from hive.telemetry import TaskTrace


@attrs.frozen
class TaskSettings:
    workdir: Path
    kill_grace: float = 10.0
    max_output_bytes: int = 5 * 1024**3
    output_check_interval: float = 1.0
    reap_orphans: bool = False
    """The daemon is the child subreaper: reap the orphans re-parented to it (see `_procs`)."""
    cgroup_parent: Path | None = None
    """Where each task gets a cgroup of its own (see `_cgroups`); None: the subreaper and the
    tag hold the tasks."""
    max_running: int | None = None
    """At most this many tasks run at once; the others wait in line, ``pending`` (None: no limit)."""

    def cgroup_of(self, record: TaskRecord) -> Path | None:
        """The task's cgroup, if one holds it."""
        if self.cgroup_parent is None or record.held_by is not HeldBy.CGROUP:
            return None
        return self.cgroup_parent / record.serial


@attrs.define(eq=False)
class Task:
    """A task the daemon knows, with the in-memory state that its record does not hold.

    Whether its end is owed, and who holds it, is the owed-end model's (see `hive.bash._ledger`).
    """

    record: TaskRecord
    ended: trio.Event = attrs.field(factory=trio.Event)
    exited: trio.Event = attrs.field(factory=trio.Event)
    recorded: trio.Event = attrs.field(factory=trio.Event)
    """Set once its final record is written (not yet fsynced: see `Ledger.sync_ends`), or its
    failure to be is noted."""
    supervisor: trio.Nursery | None = None
    write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    record_dirty: bool = False
    owed_wake: OwedWake | None = None
    """The wake for this task's end, composed once when it ends."""
    trace: TaskTrace | None = None
    """Its span, from its start (or its re-adoption) to its end, where telemetry is exported."""

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
