"""How a task reads to an agent: the status of `status` and `run`, and the body of a wake."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from hive._when import counted, in_seconds
from hive.bash._model import HeldBy, StopReason, TaskState
from hive.bash.files._output import NewOutput
from hive.bash.files._records import TaskRecord
from hive.bash.files._store import Tail, decode_tail, last_lines

WAKE_STDOUT_LINES = 20
BRIEF_LINES = WAKE_STDOUT_LINES
BRIEF_TAIL_BYTES = 2048
"""An agent's answer shows at most the last ``BRIEF_LINES`` lines of a stream, and at most
``BRIEF_TAIL_BYTES`` of them (a full status: the last 4 KiB)."""
HELD_BY = {
    HeldBy.CGROUP: "cgroup (a cgroup v2 of its own holds every process it starts)",
    HeldBy.SUBREAPER: "subreaper (its process group, its HIVE_BASH_TASK tag and the daemon as subreaper)",
}
CMD_SHOWN = 2000
"""A command longer than this many characters is shown cut, with where the whole of it is."""


def shown_cmd(cmd: str, where: str = "its .cmd file") -> str:
    """The command as shown to the agent: whole, or its start and where the rest is."""
    if len(cmd) <= CMD_SHOWN:
        return cmd
    return f"{cmd[:CMD_SHOWN]}… [cut: {len(cmd.encode())} bytes in all; the whole command is in {where}]"


def waiting(place: int, limit: int | None) -> str:
    """Where a pending task is in the line of tasks waiting for a place to run."""
    most = "" if limit is None else f"; the daemon runs at most {counted(limit, 'task')} at once"
    return f"pending: number {place} in line, it starts when a place to run is free{most}"


def still_running(task_id: str, *, wakes: bool = True, pending: bool = False) -> str:
    """What to do about a task that has not ended yet: the same words in text and structured content.
    ``wakes``: whether the daemon has an agent socket to send the end to; ``pending``: whether
    it still waits for a place to run."""
    runs = "It waits in line, then runs in the background" if pending else "It runs in the background"
    if not wakes:
        return (
            f"{runs}. No agent socket is configured (--agent-socket), so no wake "
            f"will follow: status({task_id!r}, wait_seconds=30) waits for its end, stop({task_id!r}) "
            "ends it, and until you have seen its end it stays in mcp-loose-ends/."
        )
    return (
        f"{runs}; you will be woken by a message from bash-task-{task_id} when it ends. "
        f"status({task_id!r}, wait_seconds=30) waits for it, stop({task_id!r}) ends it."
    )


def describe_signals(record: TaskRecord) -> str:
    if not record.signals and record.stop_reason is StopReason.OUTPUT_CAP:
        return "no signal sent: its writer met the file size limit a little past the cap"
    if not record.signals:
        return "no signal sent"
    if record.signals == ("SIGINT",):
        return "SIGINT to all its processes"
    if record.signals[0] == "SIGKILL":
        return "SIGKILL to all its processes"
    return "SIGINT to all its processes, then SIGKILL to those still alive"


_NEVER_RAN = {
    TaskState.STOPPED: "stopped on request while it waited for a place to run: it never ran",
    TaskState.INTERRUPTED: "interrupted: it could not be started when its turn in line came (its notes say why)",
}
"""How a task that ended still in line (its record keeps its number) ended."""


def describe_end(record: TaskRecord) -> str:
    """One line on how a final task ended, e.g. ``done, exit code 0 after 1.2 s``."""
    state = record.state
    code = f"exit code {record.exit_code}" if record.exit_code is not None else "no exit code"
    duration = record.duration(record.ended_at or time.time())
    took = f" after {in_seconds(duration)}" if duration is not None else ""
    if state is TaskState.DONE:
        return f"done, {code}{took}"
    if state is TaskState.TIMED_OUT:
        return f"timed out after {in_seconds(record.timeout_secs or 0)} ({describe_signals(record)}), {code}"
    if record.queued is not None and state in _NEVER_RAN:
        return _NEVER_RAN[state]
    if state is TaskState.STOPPED:
        why = "on request" if record.stop_reason is StopReason.REQUESTED else "at the output cap"
        return f"stopped {why} ({describe_signals(record)}), {code}{took}"
    if state is TaskState.INTERRUPTED:
        return "interrupted: its process was gone after a daemon restart and no exit status was recorded"
    return str(state.value)


def headline(record: TaskRecord, now: float, place: int | None = None, limit: int | None = None) -> str:
    """One line on where the task is; ``place``: its place in line, if it waits for a place to
    run (at most ``limit`` run at once)."""
    if record.state.final:
        return describe_end(record)
    if place is not None:
        return waiting(place, limit)
    duration = record.duration(now)
    running = f"running for {in_seconds(duration)}" if duration is not None else record.state.value
    if record.stop_reason is not None:
        return f"{running}, being stopped ({record.stop_reason.value}; {describe_signals(record)})"
    return running


def wake_body(record: TaskRecord, stdout: str) -> str:
    """The wake for a task's end: how it ended, its command, its notes (what its stop reached,
    what may have escaped it), and its last lines of stdout."""
    lines = [f"bash task {record.id} ended: {describe_end(record)}", f"$ {shown_cmd(record.cmd)}"]
    lines += [f"note: {note}" for note in record.notes]
    tail = last_lines(stdout, WAKE_STDOUT_LINES)
    lines += ["last stdout lines:", tail] if tail else ["(no stdout)"]
    lines.append(f"status({record.id!r}) gives the full status; the whole output is in its .out/.err files.")
    return "\n".join(lines)


def brief_output(tail: Tail) -> dict[str, Any]:
    """A stream as an agent's answer shows it: its last lines, and where the whole of it is
    (and its size) only when they are not all of it."""
    shown = "".join(tail.text.splitlines(keepends=True)[-BRIEF_LINES:])
    data = shown.encode()
    if len(data) > BRIEF_TAIL_BYTES:
        shown = decode_tail(data[-BRIEF_TAIL_BYTES:])
    if shown == tail.text and not tail.truncated:
        return {"tail": shown}
    return {"tail": shown, "bytes": tail.size, "path": str(tail.path)}


def _brief_status(
    record: TaskRecord, duration: float | None, out: Tail, err: Tail, place: int | None
) -> dict[str, Any]:
    """What an agent acts on in a task's status (the rest is left to a full status): a field
    with nothing to say (no exit code yet, a stream with no output) is left out."""
    brief: dict[str, Any] = {"id": record.id, "state": record.state.value}
    if place is not None:
        brief["place_in_line"] = place
    if record.exit_code is not None:
        brief["exit_code"] = record.exit_code
    if duration is not None:
        brief["duration_secs"] = round(duration, 3)
    for label, tail in (("stdout", out), ("stderr", err)):
        if tail.size:
            brief[label] = brief_output(tail)
    return brief


def _full_status(
    r: TaskRecord,
    duration: float | None,
    out: Tail,
    err: Tail,
    *,
    cmd: str,
    cmd_path: str | None,
    place: int | None,
    wakes: bool,
) -> dict[str, Any]:
    """Every field of a task's status, as a program (the CLI's ``--json``) reads it."""
    structured: dict[str, Any] = {
        "id": r.id,
        "state": r.state.value,
        "exit_code": r.exit_code,
        "duration_secs": None if duration is None else round(duration, 3),
        "cmd": cmd,
        "cwd": r.cwd,
        "pid": r.pid,
        "timeout_secs": r.timeout_secs,
        "stop_reason": r.stop_reason.value if r.stop_reason else None,
        "signals": list(r.signals),
        "notes": list(r.notes),
        "held_by": r.held_by.value if r.held_by else None,
        "created_at": r.created_at,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "place_in_line": place,
        "stdout": {"tail": out.text, "bytes": out.size, "path": str(out.path)},
        "stderr": {"tail": err.text, "bytes": err.size, "path": str(err.path)},
    }
    if not r.state.final:
        structured["wake"] = f"bash-task-{r.id}" if wakes else None
    if cmd_path is not None:
        structured["cmd_path"] = cmd_path
    return structured


def describe_status(
    record: TaskRecord,
    out: Tail,
    err: Tail,
    now: float,
    cmd_path: str | None = None,
    *,
    wakes: bool = True,
    new: Sequence[NewOutput] = (),
    place: int | None = None,
    limit: int | None = None,
    full: bool = True,
) -> tuple[str, dict[str, Any]]:
    """The full status: text for the agent and the same as structured content; without
    ``full``, the structured content keeps only what an agent acts on (:func:`_brief_status`).

    The structured ``message`` holds the text's guidance (its headline, notes, and what to
    do next), everything but the command and the output, which have fields of their own.
    A stream read from an offset (``new``) is shown from there in the text, instead of its tail.
    ``place``: its place in the line of tasks waiting to run (at most ``limit`` run at once).
    """
    r = record
    duration = r.duration(now)
    guidance = [f"task {r.id}: {headline(r, now, place, limit)}"]
    guidance += [f"note: {note}" for note in r.notes]
    if not r.state.final:
        guidance.append(still_running(r.id, wakes=wakes, pending=place is not None))
    cmd = shown_cmd(r.cmd, cmd_path or "its .cmd file")
    structured = (
        _full_status(r, duration, out, err, cmd=cmd, cmd_path=cmd_path, place=place, wakes=wakes)
        if full
        else _brief_status(r, duration, out, err, place)
    )
    structured["message"] = "\n".join(guidance)
    lines = [guidance[0], f"$ {cmd}", *guidance[1:]]
    if r.held_by is not None:
        lines.insert(2, f"held by: {HELD_BY[r.held_by]}")
    followed = {n.stream: n for n in new}
    for n in new:
        if not full:
            structured.pop(n.stream, None)  # what is new of it is there already
        structured[f"{n.stream}_new"] = n.text
        structured[f"{n.stream}_next"] = n.next
    for label, tail in (("stdout", out), ("stderr", err)):
        if label in followed:
            lines += _new_section(followed[label])
            continue
        scope = (
            f"last {len(tail.text.encode())} of {counted(tail.size, 'byte')}"
            if tail.truncated
            else counted(tail.size, "byte")
        )
        lines.append(f"--- {label} ({scope}; whole output: {tail.path}) ---")
        if tail.text:
            lines.append(tail.text.rstrip("\n"))
    return "\n".join(lines), structured


def _new_section(new: NewOutput) -> list[str]:
    """A stream read from an offset: what is new, and the offset to pass next."""
    label, after = new.stream, f"next {new.stream}_offset={new.next}"
    if not new.text:
        return [f"--- {label}: nothing new past byte {new.offset} ({after}) ---"]
    taken = new.next - new.offset
    more = (
        f"; {counted(new.size - new.next, 'byte')} more to read: ask again from {new.next}"
        if new.more
        else ""
    )
    return [
        f"--- {label} from byte {new.offset}: {counted(taken, 'byte')} new, of {new.size} ({after}{more}) ---",
        new.text.rstrip("\n"),
    ]
