"""The task state machine: a pure function of (state, event), no Trio, no I/O.

    pending --spawned--> running --exited--> done | timed_out | stopped
    pending --withdrawn--> stopped (it waited for a place to run, and never ran)
    pending | running --vanished--> interrupted

A deadline, a stop request or the output cap does not end a task by itself: it
records *why* the task is being stopped, and the exit that follows decides the
final state. A final state is never left.
"""

from __future__ import annotations

import enum

import attrs


class TaskState(enum.Enum):
    """Where a task is in its life, as ``status`` and ``list`` show it."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    TIMED_OUT = "timed_out"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        """Whether the task has ended (no state follows this one)."""
        return self in _FINAL


_FINAL = frozenset({TaskState.DONE, TaskState.TIMED_OUT, TaskState.STOPPED, TaskState.INTERRUPTED})


class HeldBy(enum.Enum):
    """What holds every process of a task, so that a stop reaches them all."""

    CGROUP = "cgroup"
    """A cgroup v2 of its own (see `hive.bash.procs._cgroups`)."""
    SUBREAPER = "subreaper"
    """Its process group, its environment tag and the daemon as subreaper (see `hive.bash.procs._procs`)."""


class StopReason(enum.Enum):
    """Why a task was stopped: its timeout ran out, the agent or an operator asked, or its
    output passed the cap."""

    TIMEOUT = "timeout"
    REQUESTED = "requested"
    OUTPUT_CAP = "output_cap"


@attrs.frozen
class Spawned:
    pass


@attrs.frozen
class StopBegun:
    reason: StopReason


@attrs.frozen
class Exited:
    pass


@attrs.frozen
class Withdrawn:
    """A stop asked for while the task waited for a place to run: it never runs."""


@attrs.frozen
class Vanished:
    """The process is gone and left no exit status (a restart while it ran)."""


Event = Spawned | StopBegun | Exited | Withdrawn | Vanished


@attrs.frozen
class Phase:
    """Where a task is: its state, and why it is being stopped if it is."""

    state: TaskState
    stop_reason: StopReason | None = None


def advance(phase: Phase, event: Event) -> Phase:
    """The phase after ``event``; unchanged when the event does not apply."""
    if phase.state.final:
        return phase
    after = phase
    match event:
        case Spawned() if phase.state is TaskState.PENDING:
            after = Phase(TaskState.RUNNING)
        case StopBegun(reason) if phase.state is TaskState.RUNNING and phase.stop_reason is None:
            after = Phase(TaskState.RUNNING, reason)
        case Withdrawn() if phase.state is TaskState.PENDING:
            after = Phase(TaskState.STOPPED, StopReason.REQUESTED)
        case Exited() if phase.state is TaskState.RUNNING:
            after = Phase(_END_BY_REASON[phase.stop_reason], phase.stop_reason)
        case Vanished():
            after = Phase(TaskState.INTERRUPTED, phase.stop_reason)
    return after


_END_BY_REASON = {
    None: TaskState.DONE,
    StopReason.TIMEOUT: TaskState.TIMED_OUT,
    StopReason.REQUESTED: TaskState.STOPPED,
    StopReason.OUTPUT_CAP: TaskState.STOPPED,
}
