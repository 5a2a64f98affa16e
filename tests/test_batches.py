"""The batcher: blocking calls run in worker threads, many to a trip, each caller getting its own result."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio

from hive.bash._batches import Batcher, BatcherStopped


async def call_all(batcher: Batcher, function: Callable[[int], int], count: int) -> dict[int, object]:
    """``function(n)`` for each n below ``count``, all called at once through a serving ``batcher``:
    each n's result, or its OSError's message."""
    outcomes: dict[int, object] = {}

    async def one(n: int) -> None:
        try:
            outcomes[n] = await batcher.run(function, n)
        except OSError as exc:
            outcomes[n] = str(exc)

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        async with trio.open_nursery() as calls:
            for n in range(count):
                calls.start_soon(one, n)
        nursery.cancel_scope.cancel()
    return outcomes


async def test_calls_made_together_share_trips_and_each_gets_its_own_result() -> None:
    batcher = Batcher(lanes=1)
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def square(n: int) -> int:
        threads.add(threading.get_ident())
        return n * n

    assert await call_all(batcher, square, 100) == {n: n * n for n in range(100)}
    assert loop_thread not in threads
    # The calls made before the first trip began share it; those made while it ran, the next.
    assert batcher.trips <= 2


async def test_an_exception_reaches_only_its_own_caller() -> None:
    batcher = Batcher()

    def fail(n: int) -> int:
        if n == 3:
            raise OSError(f"bad {n}")
        return n

    assert await call_all(batcher, fail, 6) == {0: 0, 1: 1, 2: 2, 3: "bad 3", 4: 4, 5: 5}


async def test_a_cancelled_caller_still_waits_for_what_it_asked_to_end() -> None:
    batcher = Batcher()
    entered = threading.Event()
    release = threading.Event()
    done: list[str] = []

    def slow() -> None:
        entered.set()
        release.wait(30)
        done.append("written")

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        with trio.CancelScope() as scope:

            async def cancel_once_running() -> None:
                await trio.to_thread.run_sync(entered.wait, 30)
                scope.cancel()
                release.set()

            nursery.start_soon(cancel_once_running)
            await batcher.run(slow)
        assert scope.cancelled_caught
        # The cancellation was delivered only after the call had ended.
        assert done == ["written"]
        nursery.cancel_scope.cancel()


async def test_calls_left_when_it_stops_fail_and_later_ones_take_their_own_trip() -> None:
    batcher = Batcher(lanes=1)
    entered = threading.Event()
    release = threading.Event()

    def blocking() -> str:
        entered.set()
        release.wait(30)
        return "first"

    results: list[object] = []

    async def call(fn: object) -> None:
        try:
            results.append(await batcher.run(fn))  # type: ignore[arg-type]
        except BatcherStopped:
            results.append("stopped")

    async with trio.open_nursery() as outer, trio.open_nursery() as serving:
        await serving.start(batcher.serve)
        outer.start_soon(call, blocking)
        await trio.to_thread.run_sync(entered.wait, 30)
        # Queued behind the running trip when the batcher stops: it never runs.
        outer.start_soon(call, lambda: "second")
        await trio.testing.wait_all_tasks_blocked()
        serving.cancel_scope.cancel()
        release.set()
    assert sorted(map(str, results)) == ["first", "stopped"]
    assert await batcher.run(lambda: "alone") == "alone"


async def test_without_serve_each_call_takes_its_own_trip() -> None:
    batcher = Batcher()
    with pytest.raises(ZeroDivisionError):
        await batcher.run(lambda: 1 // 0)
    assert await batcher.run(int, "7") == 7
    assert batcher.trips == 0
