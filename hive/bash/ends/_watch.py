"""Watching a task's output (``run(..., notify_on=PATTERN)``): each line of stdout or stderr that
matches wakes the agent, without polling and without losing or repeating a match across a crash.

A watcher reads the task's output files line by line as they grow (woken by inotify). Matching
lines found within `MERGE_SECS` of the first go in one wake from ``bash-task-<id>``, whose body
starts ``bash task <id> printed:`` and lists them, stdout's before stderr's, each stream's in
order. Each wake has an id of its own, ``<id>:<serial>:m<n>`` (``n`` counts the task's match
wakes from 1), distinct from its end's, and is owed like an end until the agent socket
acknowledges it (the kit's outbox, `hive.daemon.OwedItems`, keyed by the courier's key of each:
told by its ack alone, no answer shows it). A task sends at most ``notify_max`` of them (default
`DEFAULT_MAX`); then one more that says later matches are not sent, and the watching ends.

What it owes is on disk before it is sent: ``bash-tasks/<id>@<serial>.watch`` holds the pattern
and the cap, how far the output was scanned when the last wake was composed, how many were
composed, and those not yet acknowledged. It is saved as the run starts, made durable with its
record before `run` answers, and each composed wake is durable (fsynced, and its directory)
before it is sent. A daemon restarted after a SIGKILL or a power cut sends those again under the
same ids and scans on from where the last composed wake left off: a match it had found but not
yet put in a wake is found again, and none already composed is composed again under another id.
A task whose record a cut left empty is recovered with the pattern its watch state keeps. The file goes
once the task has ended, all of its output is scanned and every wake is acknowledged. A wake
that cannot be saved (a full disk) is not sent: the task's scan waits, that wake in memory,
until a save lands (tried again at each output check of the manager); a daemon stopped meanwhile
leaves it unsent and unsaved, and the next one finds its lines again from the saved offsets.

What a watch holds is bounded whatever the task prints: the lines of one read (`SCAN_BYTES` a
stream), and for the wake being gathered the first lines it shows and a count of the rest
(`hive.bash.ends._matches`). A wake is composed `MERGE_SECS` after its first match, even while the
output still grows.

The lines are searched in a worker thread, never on the daemon's loop, within the bounds of
`hive.bash.ends._pattern`: a pattern that goes over one is dropped from the task with a wake that
says so, composed and owed like the others, and nothing more of the task is watched, by this
daemon or the next.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import attrs
import trio

from hive._convert import DecodeError, structure
from hive._files import open_regular, read_regular, write_atomic
from hive._inotify import IN_MODIFY, Inotify
from hive._when import counted
from hive.agent_socket import Wake, WakeCourier
from hive.bash._batches import Batcher
from hive.bash._errors import BadArgument
from hive.bash._task import Task
from hive.bash.ends._matches import STREAMS, Matches
from hive.bash.ends._owed import Key
from hive.bash.ends._pattern import Pattern, compile_pattern, pieces, search_lines
from hive.bash.files._converter import converter
from hive.bash.files._durable import GroupSync
from hive.bash.files._records import TaskRecord
from hive.bash.files._store import TaskStore
from hive.daemon import OwedItems, Telling

log = logging.getLogger(__name__)

MERGE_SECS = 0.2
"""Matches found within this long of the first go in one wake."""
DEFAULT_MAX = 20
MAX_MAX = 1000
SCAN_BYTES = 1 << 20
"""The most one read takes of a stream; a line longer than this counts as lines of this length."""
SEARCH_THREADS = 2
"""The most worker threads searching lines at once, for all tasks."""
_STREAMS = STREAMS
_WAKE_MARK = ":m"


@attrs.frozen
class MatchWake:
    """A wake composed for matching lines: its number among the task's match wakes, and its body."""

    number: int
    body: str


@attrs.frozen(kw_only=True)
class _OwedMatch(Telling):
    run: Key
    wake: MatchWake


@attrs.frozen
class WatchState:
    """``<id>@<serial>.watch``: what the watching of one run owes and how far it has got."""

    task_id: str
    serial: str
    notify_on: str | None = None
    notify_max: int | None = None
    """The run's pattern and cap, as its record has them (a record a power cut left empty does not)."""
    stdout: int = 0
    stderr: int = 0
    """How far each stream was scanned when the last wake was composed (bytes)."""
    composed: int = 0
    """How many match wakes were composed (the last one's number)."""
    owed: tuple[MatchWake, ...] = ()
    """Those composed and not yet acknowledged, in order (on disk; in memory the outbox says)."""
    capped: bool = False
    """The wake saying later matches are not sent (the cap was reached, or the pattern went over
    a bound) was composed: nothing more is watched."""
    scanned: bool = False
    """The run has ended and all of its output was scanned."""
    searching: float = 0.0
    """The CPU time the searches of its lines have taken (seconds), as of the last save."""


def _read_lines(path: Path, offset: int, *, final: bool) -> tuple[list[bytes], int]:
    """The whole lines of ``path`` past ``offset`` (up to `SCAN_BYTES`), as a search sees them
    (`pieces`), and the offset past them; with ``final``, a last line without its newline too
    (nothing more will be written)."""
    fd = open_regular(path)
    if fd is None:
        return [], offset
    try:
        data = os.pread(fd, SCAN_BYTES, offset)
    finally:
        os.close(fd)
    if not (final and len(data) < SCAN_BYTES):
        end = data.rfind(b"\n") + 1
        if end:
            data = data[:end]
        elif len(data) < SCAN_BYTES:
            return [], offset  # a line still being written
        # else a line longer than a read: taken as a line of its own
    if not data:
        return [], offset
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [piece for line in lines for piece in pieces(line)], offset + len(data)


@attrs.define(eq=False)
class Watcher:
    """Watches the output of every run that asked, and owes the agent its match wakes."""

    store: TaskStore
    courier: WakeCourier[Key]
    reads: Batcher
    writes: Batcher
    syncs: GroupSync
    """Where a composed wake's state is made durable before the wake is sent."""
    line_seconds: float
    """The most CPU time a search of one line may take (`TaskSettings.line_seconds`)."""
    merge_secs: float = MERGE_SECS
    _searching: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(SEARCH_THREADS))
    _states: dict[Key, WatchState] = attrs.field(factory=dict)
    _saving: dict[Key, trio.Lock] = attrs.field(factory=dict)
    _unsaved: dict[Key, trio.Event] = attrs.field(factory=dict)
    """The runs whose state could not be saved (a full disk), each with an event set once it is."""
    _outbox: OwedItems[Key, _OwedMatch] = attrs.field(factory=OwedItems)
    """The match wakes owed, by the courier's key of each (its run's state on disk lists them)."""

    @staticmethod
    def owns(key: Key) -> bool:
        """Whether ``key`` (of a wake the courier sent) names a match wake."""
        return _WAKE_MARK in key[1]

    def path(self, task_id: str, serial: str) -> Path:
        return watch_path(self.store, task_id, serial)

    def save_start(self, record: TaskRecord) -> None:
        """Save the first state of a new run that asked to be watched, not fsynced (blocking:
        the spawn's worker thread calls it beside the record, and it is made durable with it)."""
        if record.notify_on is not None:
            write_atomic(self.path(record.id, record.serial), _encode(_first_state(record)), durable=False)

    def unsave_start(self, record: TaskRecord) -> None:
        """Remove what `save_start` saved for a run whose process then did not start (blocking)."""
        with contextlib.suppress(OSError):
            _remove(self.path(record.id, record.serial))

    async def watch(self, task: Task) -> None:
        """Watch ``task``'s output until it has ended and all of it is scanned (or the cap is
        reached); the wakes still owed from a previous daemon are sent first."""
        record = task.record
        if record.notify_on is None:
            return
        try:
            pattern = compile_pattern(record.notify_on)
        except BadArgument as exc:  # a record written by hand, say
            log.warning("task %s is not watched: %s", record.id, exc)
            return
        key = (record.id, record.serial)
        state = await self.reads.run(self._load, key) or _first_state(record)
        self._states[key] = state
        for wake in state.owed:
            self._owe(key, wake, saved=True)
        if state.capped or state.scanned:
            await self._save(key)
            return
        limit = record.notify_max or DEFAULT_MAX
        watcher: Inotify | None = None
        try:
            watcher = Inotify()
            for stream in _STREAMS:
                watcher.watch(self._stream_path(record.id, stream), IN_MODIFY)
        except OSError as exc:
            log.warning("cannot watch the output of task %s (%s): it is scanned when it ends", record.id, exc)
            if watcher is not None:
                watcher.close()
                watcher = None
        try:
            await self._scan(task, pattern, limit, watcher)
        finally:
            if watcher is not None:
                watcher.close()

    async def _scan(self, task: Task, pattern: Pattern, limit: int, watcher: Inotify | None) -> None:
        key = task.key
        state = self._states[key]
        offsets = {"stdout": state.stdout, "stderr": state.stderr}
        found = Matches()
        first_at: float | None = None
        while True:
            final = task.final
            progress = False
            for stream in _STREAMS:
                path = self._stream_path(task.id, stream)
                lines, offsets[stream] = await self.reads.run(_read_lines, path, offsets[stream], final=final)
                progress = progress or bool(lines)
                over = await self._search(key, pattern, stream, lines, found)
                if over is not None:
                    if found:
                        await self._compose(key, found, offsets, limit)
                    if not self._states[key].capped:
                        await self._drop(key, offsets, over)
                    return
            if found and first_at is None:
                first_at = trio.current_time()
            due = first_at is not None and trio.current_time() >= first_at + self.merge_secs
            if progress and not due:
                continue  # read on to the end first
            if found and (final or due):
                # Composed once due, even while the output still grows: what a wake holds is
                # bounded (`Matches`), and a task that never stops printing still wakes the agent.
                await self._compose(key, found, offsets, limit)
                found, first_at = Matches(), None
                if self._states[key].capped:
                    return
            if progress:
                continue
            if final:
                self._states[key] = attrs.evolve(
                    self._states[key], scanned=True, stdout=offsets["stdout"], stderr=offsets["stderr"]
                )
                await self._save(key)
                return
            deadline = first_at + self.merge_secs if first_at is not None else math.inf
            with trio.move_on_at(deadline):
                await self._changed(task, watcher)

    async def _search(
        self, key: Key, pattern: Pattern, stream: str, lines: list[bytes], found: Matches
    ) -> str | None:
        """Add the lines that match to ``found``, searched in a worker thread; which bound the
        pattern went over, if it did."""
        if not lines:
            return None
        state = self._states[key]
        search = functools.partial(
            search_lines, pattern, lines, spent=state.searching, line_seconds=self.line_seconds
        )
        # Abandoned at a stop: a search is bounded, and the daemon's exit does not wait for it.
        searched = await trio.to_thread.run_sync(search, limiter=self._searching, abandon_on_cancel=True)
        self._states[key] = attrs.evolve(self._states[key], searching=state.searching + searched.seconds)
        for index in searched.matches:
            found.add(stream, lines[index])
        return searched.over

    async def _drop(self, key: Key, offsets: dict[str, int], over: str) -> None:
        """Compose the wake saying the pattern is dropped from the task: it went over a bound."""
        task_id = self._states[key].task_id
        body = (
            f"bash task {task_id} printed: lines its notify_on pattern is dropped for: {over}, so later "
            f"lines are not searched. status('{task_id}', stdout_offset={offsets['stdout']}, "
            f"stderr_offset={offsets['stderr']}) reads its output on from here."
        )
        await self._add(key, body, offsets, capped=True)

    @staticmethod
    async def _changed(task: Task, watcher: Inotify | None) -> None:
        """Until the output grows (where it is watched) or the task ends."""
        async with trio.open_nursery() as nursery:

            async def ended() -> None:
                await task.ended.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(ended)
            if watcher is not None:
                await watcher.changed()
                nursery.cancel_scope.cancel()

    async def _compose(self, key: Key, found: Matches, offsets: dict[str, int], limit: int) -> None:
        state = self._states[key]
        task_id = state.task_id
        number = state.composed + 1
        if state.composed >= limit:
            body = (
                f"bash task {task_id} printed: more lines that match its notify_on pattern; later matches "
                f"are not sent (at most {counted(limit, 'wake')} a task). status('{task_id}', stdout_offset="
                f"{offsets['stdout']}, stderr_offset={offsets['stderr']}) reads its output on from here."
            )
        else:
            body = "\n".join([f"bash task {task_id} printed:", *found.lines()])
        await self._add(key, body, offsets, capped=number > limit)

    async def _add(self, key: Key, body: str, offsets: dict[str, int], *, capped: bool) -> None:
        """Compose the next match wake with this body, and send it once it is saved."""
        state = self._states[key]
        wake = MatchWake(state.composed + 1, body)
        self._states[key] = attrs.evolve(
            state, composed=wake.number, capped=capped, stdout=offsets["stdout"], stderr=offsets["stderr"]
        )
        wake_key = self._owe(key, wake, saved=False)
        # Durable before it is sent: a crash or a power cut from here on sends it again under the
        # same id. On a full disk the scan waits here, this wake in memory: a daemon that stops
        # meanwhile leaves it unsent and unsaved, and the next one finds its lines again.
        if not await self._save(key, durable=True):
            await self._unsaved[key].wait()
        if self._outbox.came(wake_key):
            self._send(wake_key, wake)

    def _owe(self, run: Key, wake: MatchWake, *, saved: bool) -> Key:
        """Owe ``wake`` (sent once ``saved``); the courier's key of it."""
        task_id, serial = run
        key = (task_id, f"{serial}{_WAKE_MARK}{wake.number}")
        if self._outbox.owe(key, _OwedMatch(ended=saved, run=run, wake=wake)):
            self._send(key, wake)
        return key

    def _send(self, key: Key, wake: MatchWake) -> None:
        wake_of = Wake(sender=f"bash-task-{key[0]}", body=wake.body, end_id=":".join(key))
        self.courier.send(key, self.courier.agent_socket, wake_of)

    def _owed(self, run: Key) -> tuple[MatchWake, ...]:
        """The run's match wakes owed, in the order they were composed."""
        items = (self._outbox.item(key) for key in self._outbox.owed())
        return tuple(item.wake for item in items if item is not None and item.run == run)

    async def acked(self, key: Key) -> None:
        """The agent socket acknowledged the match wake ``key`` names: it is owed no more."""
        item = self._outbox.item(key)
        self._outbox.acked(key)  # told: what owes it on disk goes below
        if item is not None and item.run in self._states:
            await self._save(item.run)

    async def _save(self, key: Key, *, durable: bool = False) -> bool:
        """Write the run's state as it is now (``durable``: its name fsynced too, before this
        returns); the file goes once nothing is owed or left to scan. Whether it landed: one that
        did not (a full disk) is tried again by `save_again`, durably."""
        lock = self._saving.setdefault(key, trio.Lock())
        async with lock:
            state = self._states.get(key)
            path = self.path(*key)
            owed = self._owed(key)
            try:
                if state is None:
                    pass  # removed by an earlier save: nothing is owed
                elif (state.scanned or state.capped) and not owed:
                    await self.writes.run(_remove, path)
                    self._states.pop(key, None)
                else:
                    await self.writes.run(write_atomic, path, _encode(attrs.evolve(state, owed=owed)))
                    if durable or key in self._unsaved:
                        await self.syncs.sync((), (path.parent,))
            except OSError as exc:
                if key not in self._unsaved:
                    log.warning(
                        "cannot save %s (%s): the task's next match wake waits until it is saved, "
                        "tried again at each output check; free space there",
                        path,
                        exc,
                    )
                    self._unsaved[key] = trio.Event()
                return False
            landed = self._unsaved.pop(key, None)
            if landed is not None:
                log.info("saved %s: the task's match wakes go on", path)
                landed.set()
            return True

    async def save_again(self) -> None:
        """Try again to save the states that could not be saved (the manager's output check
        calls it)."""
        for key in list(self._unsaved):
            await self._save(key)

    def _load(self, key: Key) -> WatchState | None:
        state = _decode(self.path(*key))
        return state if state is not None and (state.task_id, state.serial) == key else None

    def _stream_path(self, task_id: str, stream: str) -> Path:
        return self.store.out_path(task_id) if stream == "stdout" else self.store.err_path(task_id)


def watch_path(store: TaskStore, task_id: str, serial: str) -> Path:
    return store.tasks_dir / f"{task_id}@{serial}.watch"


def saved_watch(store: TaskStore, task_id: str, serial: str | None) -> WatchState | None:
    """The watch state saved for run ``serial`` of ``task_id`` (blocking); for a run whose serial
    is not known, the one of its runs' saved last. None where there is none that can be read."""
    if serial is not None:
        paths = [watch_path(store, task_id, serial)]
    else:
        paths = sorted(store.tasks_dir.glob(f"{task_id}@*.watch"), key=_mtime, reverse=True)
    for path in paths:
        state = _decode(path)
        if state is not None and state.task_id == task_id:
            return state
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0


def _first_state(record: TaskRecord) -> WatchState:
    return WatchState(record.id, record.serial, notify_on=record.notify_on, notify_max=record.notify_max)


def _encode(state: WatchState) -> bytes:
    return json.dumps(converter.unstructure(state), separators=(",", ":")).encode()


def _decode(path: Path) -> WatchState | None:
    """The watch state at ``path``; None (a warning logged) where it cannot be read."""
    try:
        data = read_regular(path)
    except OSError as exc:
        log.warning("cannot read %s (%s): the task's output is scanned from its start", path, exc)
        return None
    if data is None:
        return None
    try:
        raw: Any = json.loads(data)
        return structure(converter, raw, WatchState)
    except (ValueError, DecodeError) as exc:
        log.warning("%s is not a watch state (%s): the task's output is scanned from its start", path, exc)
        return None


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
