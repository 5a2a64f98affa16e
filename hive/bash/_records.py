"""What the daemon keeps on disk: one record per task, one loose end per end the agent is owed."""

from __future__ import annotations

import attrs

from hive.bash._model import HeldBy, Phase, StopReason, TaskState


@attrs.frozen
class TaskRecord:
    """``bash-tasks/<id>.json``: everything needed to report on a task or re-adopt it after a restart."""

    id: str
    serial: str
    cmd: str
    cwd: str
    created_at: float
    state: TaskState = TaskState.PENDING
    named: bool = False
    timeout_secs: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    pid: int | None = None
    pid_start_time: int | None = None
    stop_reason: StopReason | None = None
    stop_started_at: float | None = None
    signals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    held_by: HeldBy | None = None
    """What holds its processes (None: a record of a daemon that did not say)."""

    @property
    def phase(self) -> Phase:
        """Its state and why it is stopping or stopped, together."""
        return Phase(self.state, self.stop_reason)

    def duration(self, now: float) -> float | None:
        """How long it ran (so far, at ``now``, if it still runs); None if it never started."""
        if self.started_at is None:
            return None
        return max(0.0, (self.ended_at if self.ended_at is not None else now) - self.started_at)


@attrs.frozen
class OwedWake:
    sender: str
    body: str


@attrs.frozen
class LooseEnd:
    """``mcp-loose-ends/bash-task-<id>.json``: an end the agent has not been told yet.

    ``wake`` is filled in at the first interval after the task ends (if its end is still owed
    then), or at once by a restarted daemon; without one, the task's record says whether it
    has ended.
    """

    task_id: str
    serial: str
    cmd: str
    since: float
    wake: OwedWake | None = None
