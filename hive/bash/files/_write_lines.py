"""The loose-end writes of each run, in a line of their own.

One run's writes are carried out one after another in the order the owed-end model asked for
them (the model counts a write as done once it has landed, so a later event never races an
earlier write of the same file); different runs' lines run side by side. A caller that needs
its writes done before it goes on awaits them (`WriteLines.carry_out`); the others are carried
out soon after, by the line's own task while the lines serve, or by the next caller that
awaits them once they have stopped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterable

import attrs
import trio

from hive.bash._background import Background
from hive.bash._task import Task
from hive.bash.ends._owed import Key, LooseEndAction
from hive.bash.files._records import LooseEnd, OwedWake


@attrs.frozen
class UnclaimedEnd:
    """A loose end a restarted daemon found with no task of its own, and the wake it owes."""

    loose_end: LooseEnd
    wake: OwedWake


@attrs.define(eq=False)
class Write:
    """One loose-end write in a run's line, and how it went."""

    action: LooseEndAction
    task: Task | None
    unclaimed: UnclaimedEnd | None
    done: trio.Event = attrs.field(factory=trio.Event)
    landed: bool = False
    """It was carried out, and the model told so."""
    error: OSError | None = None
    """What the disk refused it with, if it did."""


@attrs.define(eq=False)
class _Line:
    writes: deque[Write] = attrs.field(factory=deque)
    carrying: bool = False


@attrs.define(eq=False)
class WriteLines:
    """The lines of the runs that have loose-end writes lined up or under way."""

    carry: Callable[[Write], Awaitable[bool]]
    """Carries out one write; whether it landed."""
    _lines: dict[Key, _Line] = attrs.field(factory=dict)
    _background: Background = attrs.field(factory=Background)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:  # noqa: ASYNC128 - passed on
        """Carry out the writes nobody awaits until cancelled."""
        await self._background.serve(task_status=task_status)

    def pending(self, key: Key) -> bool:
        """Whether a write of run ``key``'s loose end is lined up or under way."""
        return key in self._lines

    async def wait(self, key: Key) -> None:
        """Wait until the writes of run ``key``'s loose end lined up so far are done."""
        line = self._lines.get(key)
        if line is not None:
            await self.carry_out(list(line.writes))

    def line_up(self, write: Write) -> None:
        """Put ``write`` at the end of its run's line."""
        key = write.action.key
        line = self._lines.setdefault(key, _Line())
        line.writes.append(write)
        nursery = self._background.nursery
        if not line.carrying and nursery is not None:
            line.carrying = True
            nursery.start_soon(self._carry_line, key, line)

    async def carry_out(self, writes: Iterable[Write]) -> None:
        """Wait until ``writes`` are done, carrying out their lines here if nothing else does."""
        waiting = [w for w in writes if not w.done.is_set()]
        idle = {
            key: line
            for key in dict.fromkeys(w.action.key for w in waiting)
            if (line := self._lines.get(key)) is not None and not line.carrying
        }
        if idle:
            # Lined up while the lines were not serving (they are stopping): carried out here.
            async with trio.open_nursery() as nursery:
                for key, line in idle.items():
                    line.carrying = True
                    nursery.start_soon(self._carry_line, key, line)
        for write in waiting:
            await write.done.wait()

    async def _carry_line(self, key: Key, line: _Line) -> None:
        try:
            while line.writes:
                write = line.writes[0]
                try:
                    write.landed = await self.carry(write)
                finally:
                    line.writes.popleft()
                    write.done.set()
        finally:
            line.carrying = False
            if not line.writes and self._lines.get(key) is line:
                del self._lines[key]
