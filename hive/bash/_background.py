"""A nursery an object lends its own work while it serves: the tasks nobody awaits.

The batcher's trips and the ledger's lines of loose-end writes run in one. Before `serve` has
started and once it is stopping, there is none (`Background.nursery` is None), and the owner
does the work itself, in its caller's task.
"""

from __future__ import annotations

import attrs
import trio


@attrs.define(eq=False)
class Background:
    """A nursery for tasks nobody awaits, open while `serve` runs."""

    nursery: trio.Nursery | None = None
    """The open nursery; None before `serve` has started it and from when it is stopping."""

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery open until cancelled, then wait for the tasks it still runs."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                # Closed to new tasks from here: work that comes while the last ones end is
                # done by its caller.
                self.nursery = None
