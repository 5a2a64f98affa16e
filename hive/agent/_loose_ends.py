"""The bash daemon's loose ends, read for the agent: the tasks whose end it has not been told yet.

The daemon (``hive.bash``) keeps ``<state>/mcp-loose-ends/bash-task-<id>.json`` from a task's
start until the agent has been told the task's end (its wake was acknowledged, or a `status`
answer carrying it reached the agent), and the task's record beside it in
``<state>/bash-tasks/<id>.json``. An earlier run still owed when a later one took its name
keeps its own, ``bash-task-<id>@<serial>.json``, its files those of the generation whose record
has that serial (``<id>.json.<n>``). A loose end holding a wake is an ended task; one without, a
task still running. This module only reads: listing a loose end does not settle it.

Tasks run as the daemon's user and can write into the state directory, so the files are read
the daemon's way (no symlink followed, regular files only) and within a size bound, and a file
that is not what it should be is reported as unreadable, never fatal to the listing.
Everything here is synchronous: callers run :func:`read_loose_ends` in a worker thread.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import attrs

from hive._files import open_regular
from hive._when import counted, in_seconds
from hive.bash import LooseEnd, TaskRecord, decode

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A loose end or record larger than this is not one the daemon wrote (its largest holds a
1 MiB command, which JSON's escapes make at most 6 MiB, and a wake of a few KiB): it is
reported as unreadable, not read."""
CMD_SHOWN = 500
"""A command longer than this many characters is shown cut, with the file that holds all of it."""
_PREFIX = "bash-task-"
_SUFFIX = ".json"
UNKNOWN = "unknown"
"""The state of an ended task whose final record is not there (its wake's body says how it ended)."""


@attrs.frozen
class Wake:
    sender: str
    body: str


@attrs.frozen
class Entry:
    """One loose end as the agent sees it."""

    id: str
    cmd: str
    cmd_path: str
    state: str
    """``running``, a final task state (``done``, ``timed_out``, ...) from its record, or ``unknown``."""
    ended: bool
    exit_code: int | None
    since: float | None
    ended_at: float | None
    stdout_path: str
    stderr_path: str
    wake: Wake | None
    """The wake its end is owed as; None while the task runs."""

    def headline(self, now: float) -> str:
        if self.ended:
            code = "no exit code" if self.exit_code is None else f"exit code {self.exit_code}"
            state = "ended" if self.state == UNKNOWN else self.state
            return f"{self.id}: {state}, {code}"
        running = f"{self.state} for {in_seconds(now - self.since)}" if self.since is not None else self.state
        return f"{self.id}: {running}"

    def structured(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cmd": self.cmd,
            "cmd_path": self.cmd_path,
            "state": self.state,
            "ended": self.ended,
            "exit_code": self.exit_code,
            "since": self.since,
            "ended_at": self.ended_at,
            "stdout_path": self.stdout_path,
            "stderr_path": self.stderr_path,
            "wake": None if self.wake is None else {"from": self.wake.sender, "body": self.wake.body},
        }


@attrs.frozen
class Unreadable:
    path: str
    reason: str


@attrs.frozen
class Listing:
    entries: tuple[Entry, ...]
    unreadable: tuple[Unreadable, ...] = ()
    missing: bool = False
    """The daemon has not made its ``mcp-loose-ends/`` directory (it never ran on this state dir)."""


def read_loose_ends(loose_ends_dir: Path) -> Listing:
    """Every loose end in ``loose_ends_dir``, oldest first (blocking: run in a worker thread).

    Raises OSError only if the directory itself cannot be listed.
    """
    tasks_dir = loose_ends_dir.parent / "bash-tasks"
    try:
        with os.scandir(loose_ends_dir) as found:
            names = sorted(e.name for e in found if e.name.startswith(_PREFIX) and e.name.endswith(_SUFFIX))
    except FileNotFoundError:
        return Listing((), missing=True)
    entries = []
    unreadable = []
    for name in names:
        path = loose_ends_dir / name
        try:
            task_id, _, serial = name.removeprefix(_PREFIX).removesuffix(_SUFFIX).partition("@")
            entry = _entry(path, task_id, serial or None, tasks_dir)
        except (OSError, ValueError, RecursionError) as exc:
            unreadable.append(Unreadable(_text(str(path)), _text(str(exc)) or type(exc).__name__))
            continue
        if entry is not None:  # else it was settled (removed) since the directory was listed
            entries.append(entry)
    entries.sort(key=lambda e: (e.since if e.since is not None else math.inf, e.id))
    return Listing(tuple(entries), tuple(unreadable))


def _entry(path: Path, task_id: str, serial: str | None, tasks_dir: Path) -> Entry | None:
    """``serial``: the run the file's name gives, for an earlier run's loose end (a later run
    took its name, so its files are the generation that has its record)."""
    data = _read_bounded(path)
    if data is None:
        return None
    loose_end = decode(data, LooseEnd)
    if loose_end.task_id != task_id:
        raise ValueError(f"it names task {loose_end.task_id!r}, not {task_id!r}")
    if serial is not None and loose_end.serial != serial:
        raise ValueError(f"it names run {loose_end.serial!r} of {task_id!r}, not {serial!r}")
    record, tail = _run_of(tasks_dir, task_id, loose_end.serial, earlier=serial is not None)
    if record is not None and record.state.final:
        state = record.state.value
    elif loose_end.wake is not None:
        state = UNKNOWN  # ended, its final record not saved yet (or lost): the wake's body says how
    else:
        # A record is saved `pending` before the task's process starts and, while it runs, only
        # now and then: a task whose loose end holds no wake has started and not ended.
        state = "running"
    cmd_path = tasks_dir / f"{task_id}.cmd{tail}"
    return Entry(
        id=_text(task_id),
        cmd=_shown_cmd(loose_end.cmd, cmd_path),
        cmd_path=_text(str(cmd_path)),
        state=state,
        ended=state != "running",
        exit_code=None if record is None else record.exit_code,
        since=_finite(loose_end.since),
        ended_at=None if record is None else _finite(record.ended_at),
        stdout_path=_text(str(tasks_dir / f"{task_id}.out{tail}")),
        stderr_path=_text(str(tasks_dir / f"{task_id}.err{tail}")),
        wake=None
        if loose_end.wake is None
        else Wake(_text(loose_end.wake.sender), _text(loose_end.wake.body)),
    )


def _run_of(tasks_dir: Path, task_id: str, serial: str, *, earlier: bool) -> tuple[TaskRecord | None, str]:
    """The record of the run ``serial`` of ``task_id`` and the ending of its files' names: ``""``
    for the latest run, ``.<n>`` for an earlier one moved aside (see hive.bash.files._store)."""
    record = _record(tasks_dir / f"{task_id}.json", serial)
    if record is not None or not earlier:
        return record, ""
    prefix = f"{task_id}.json."
    try:
        with os.scandir(tasks_dir) as found:
            generations = sorted(
                (int(g) for e in found if (g := e.name.removeprefix(prefix)) != e.name and g.isdigit()),
                reverse=True,
            )
    except OSError:
        return None, ""
    for generation in generations:
        record = _record(tasks_dir / f"{prefix}{generation}", serial)
        if record is not None:
            return record, f".{generation}"
    return None, ""


def _record(path: Path, serial: str) -> TaskRecord | None:
    """The task's record if it is of the same run as its loose end; None if it cannot tell."""
    try:
        data = _read_bounded(path)
        record = None if data is None else decode(data, TaskRecord)
    except (OSError, ValueError, RecursionError):
        return None
    return record if record is not None and record.serial == serial else None


def _read_bounded(path: Path) -> bytes | None:
    """A regular file's bytes (no symlink followed); None if it is not there."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"it is {size} bytes, larger than any loose end or record the daemon writes")
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise ValueError("it grew past the size of any loose end or record the daemon writes")
    return b"".join(chunks)


def _shown_cmd(cmd: str, cmd_path: Path) -> str:
    if len(cmd) <= CMD_SHOWN:
        return _text(cmd)
    return _text(
        f"{cmd[:CMD_SHOWN]}… [cut: {len(cmd)} characters in all; the whole command is in {cmd_path}]"
    )


def _text(value: str) -> str:
    """``value`` as valid Unicode (a lone surrogate from a file or a file name becomes U+FFFD)."""
    return value.encode("utf-8", errors="replace").decode("utf-8") if _has_surrogate(value) else value


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def describe(
    listing: Listing, loose_ends_dir: Path, *, limit: int, now: float | None = None
) -> tuple[str, dict[str, Any]]:
    """The `loose_ends` answer: text for the agent and the same as structured content."""
    now = time.time() if now is None else now
    entries = listing.entries
    shown = entries[:limit] if limit else entries
    ended = sum(e.ended for e in entries)
    if listing.missing:
        summary = (
            f"No loose ends: the bash daemon has not run on this state directory ({loose_ends_dir} "
            "does not exist), so no task has been started."
        )
    elif not entries:
        summary = "No loose ends: you have been told the end of every bash task you started."
    else:
        summary = (
            f"{counted(len(entries), 'loose end')}: bash tasks whose end you have "
            f"not been told yet ({ended} ended, {len(entries) - ended} still running), oldest first. "
            "Listing them does not settle them: `status` of the bash tools with a task's id shows its full "
            "status (and settles an ended one); a task still running wakes you when it ends."
        )
    guidance = [summary]
    if len(shown) < len(entries):
        guidance.append(
            f"({counted(len(entries) - len(shown), 'newer one')} not shown; pass limit=0 for all.)"
        )
    if listing.unreadable:
        guidance.append(
            f"{counted(len(listing.unreadable), 'file')} in {loose_ends_dir} could not be read as loose ends "
            "(listed under `unreadable`); they are not the daemon's, or were damaged."
        )
    lines = list(guidance)
    for entry in shown:
        lines += ["", entry.headline(now), f"  $ {entry.cmd}"]
        lines += [f"  stdout: {entry.stdout_path}", f"  stderr: {entry.stderr_path}"]
        if entry.wake is not None:
            lines.append(f"  its wake (from {entry.wake.sender}), not delivered to you yet:")
            lines += [f"    {line}" for line in entry.wake.body.splitlines()]
    if listing.unreadable:
        lines.append("")
        lines += [f"unreadable: {u.path}: {u.reason}" for u in listing.unreadable]
    structured = {
        "loose_ends": [e.structured() for e in shown],
        "total": len(entries),
        "ended": ended,
        "unreadable": [{"path": u.path, "reason": u.reason} for u in listing.unreadable],
        "message": "\n".join(guidance),
    }
    return "\n".join(lines), structured
