"""Blocking calls in worker threads, many to a trip.

When 200 tasks end at once, each needs its exit file read and its record saved, and each
`status` answer needs its output's tails. A worker-thread trip apiece (a thread handed the
job, the GIL passed back and forth, the result posted back to the loop) costs more than the
work itself. A :class:`Batcher` runs the calls that arrive while its trips are busy together
in the next trip, one after another in one thread: one trip for however many calls come at
once, and at most ``lanes`` trips at a time.

A call waits for its result even when its caller is cancelled, as `trio.to_thread.run_sync`
does: what it asked for is done, and its caller learns how it went. Calls for the same file
must not be in flight together (each caller awaits the one before), since two lanes may run
them in either order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs
import outcome
import trio

from hive.bash._background import Background
from hive.bash._errors import BashError

T = TypeVar("T")


class BatcherStopped(BashError):
    """The batcher stopped (the daemon is shutting down) before this call could run."""


@attrs.define(eq=False)
class _Call(Generic[T]):
    fn: Callable[[], T]
    done: trio.Event = attrs.field(factory=trio.Event)
    result: outcome.Outcome[T] | None = None


def _run_all(calls: list[_Call[Any]]) -> None:
    for call in calls:
        call.result = outcome.capture(call.fn)


@attrs.define(eq=False)
class Batcher:
    lanes: int = 2
    per_trip: int | None = None
    """The most calls one trip takes (None: all that are waiting)."""
    trips: int = 0
    """Trips made so far (for tests and benchmarks)."""
    _background: Background = attrs.field(factory=Background)
    _queue: list[_Call[Any]] = attrs.field(factory=list)
    _busy: int = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:  # noqa: ASYNC128 - passed on
        """Run trips until cancelled; a call made while this is not running takes a trip of its own."""
        try:
            await self._background.serve(task_status=task_status)
        finally:
            self._fail(self._queue)
            self._queue = []

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, in the next trip; its result or its exception."""
        bound = functools.partial(fn, *args, **kwargs)
        nursery = self._background.nursery
        if nursery is None:
            return await trio.to_thread.run_sync(bound)
        call: _Call[T] = _Call(bound)
        self._queue.append(call)
        if self._busy < self.lanes:
            self._busy += 1
            nursery.start_soon(self._trips)
        with trio.CancelScope(shield=True):
            await call.done.wait()
        await trio.lowlevel.checkpoint_if_cancelled()
        assert call.result is not None
        return call.result.unwrap()

    async def _trips(self) -> None:
        try:
            while self._queue:
                take = len(self._queue) if self.per_trip is None else self.per_trip
                calls, self._queue = self._queue[:take], self._queue[take:]
                self.trips += 1
                try:
                    await trio.to_thread.run_sync(_run_all, calls)
                finally:
                    self._fail(calls)
        finally:
            self._busy -= 1

    @staticmethod
    def _fail(calls: list[_Call[Any]]) -> None:
        """End every call: those that did not run get :class:`BatcherStopped`."""
        for call in calls:
            if call.result is None:
                call.result = outcome.Error(BatcherStopped("the daemon is stopping; this was not done"))
            call.done.set()
