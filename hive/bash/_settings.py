"""The settings a daemon's tasks run with (light: ``hive-bash-daemon`` reads them before it
imports Trio)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from hive.bash._model import HeldBy

if TYPE_CHECKING:
    from hive.bash.files._records import TaskRecord

LINE_SECONDS = 0.2
"""The most CPU time a search of one line may take before its pattern is dropped from the task."""


@attrs.frozen
class TaskSettings:
    """How the daemon's tasks run: ``hive-bash-daemon``'s flags, and what ``serve_daemon`` opens."""

    workdir: Path = attrs.field(factory=Path.cwd)
    kill_grace: float = 10.0
    max_output_bytes: int = 5 * 1024**3
    output_check_interval: float = 1.0
    reap_orphans: bool = False
    """The daemon is the child subreaper: reap the orphans re-parented to it (see `_procs`)."""
    cgroup_parent: Path | None = None
    """Where each task gets a cgroup of its own (see `_cgroups`); None: the subreaper and the
    tag hold the tasks."""
    unshare: str | None = None
    """The ``unshare`` that gives each task a cgroup namespace of its own (see `_namespaces`);
    None: the tasks get none."""
    max_running: int | None = None
    """At most this many tasks run at once; the others wait in line, ``pending`` (None: no limit)."""
    line_seconds: float = LINE_SECONDS
    """The most CPU time a ``notify_on`` search of one line may take (see `hive.bash.ends._pattern`)."""

    def cgroup_of(self, record: TaskRecord) -> Path | None:
        """The task's cgroup, if one holds it."""
        if self.cgroup_parent is None or record.held_by is not HeldBy.CGROUP:
            return None
        return self.cgroup_parent / record.serial
