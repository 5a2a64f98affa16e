"""The time the end of a turn has to be written down once the harness stops."""

from __future__ import annotations

import math

import attrs
import trio

STOP_GRACE = 15.0
"""Stopping: how long the end of a turn may take to be written down once the harness stops."""


@attrs.define(eq=False)
class StopGrace:
    """Ends are written down in shielded scopes, from `deadline`, kept as ``ending``: once the
    harness stops (`watch` is cancelled), the one under way has `STOP_GRACE` left, and so has
    each begun after. Until then they have no deadline: a turn's end waits for the disk (its
    record made durable) whole."""

    stopping: bool = False
    ending: trio.CancelScope | None = None

    async def watch(self) -> None:
        """Wait for the harness to stop (this to be cancelled)."""
        try:
            await trio.sleep_forever()
        finally:
            self.stopping = True
            if self.ending is not None:
                self.ending.deadline = trio.current_time() + STOP_GRACE

    def deadline(self) -> float:
        """The deadline of an end being written down, as it begins."""
        return trio.current_time() + STOP_GRACE if self.stopping else math.inf
