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
    """Whether the caller gave the id (``name``); else the daemon drew it."""
    timeout_secs: float | None = None
    """How long it may run before it is stopped (None: no limit)."""
    started_at: float | None = None
    ended_at: float | None = None
    """When it started and ended (Unix time)."""
    exit_code: int | None = None
    """The command's exit status, as a shell gives it: 128 + the signal's number where a signal
    ended it."""
    pid: int | None = None
    pid_start_time: int | None = None
    """Its wrapper's pid and that process's start time (``/proc/<pid>/stat``, in clock ticks):
    together they tell the wrapper from a later process given the same pid."""
    stop_reason: StopReason | None = None
    stop_started_at: float | None = None
    """Why and when a stop began, once one has."""
    signals: tuple[str, ...] = ()
    """The signals its processes were sent, in order (``SIGINT``, then ``SIGKILL`` if it came to that)."""
    notes: tuple[str, ...] = ()
    """What the daemon has to say of it: processes left behind, an output cap reached, ..."""
    held_by: HeldBy | None = None
    """What holds its processes (None: a record of a daemon that did not say)."""
    notify_on: str | None = None
    notify_max: int | None = None
    """The pattern (an RE2 regular expression) whose matching output lines wake the agent, and
    how many such wakes it may send (see `hive.bash.ends._watch`)."""
    queued: int | None = None
    """Its number in the line of tasks waiting for a place to run (``--max-running``): the
    line starts them in this order. None once it has been started, or if it never waited."""

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
    """A wake the agent is owed: who it is from and what it says."""

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
