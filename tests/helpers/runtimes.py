"""A runtime's turn as a test drives it: run, and cancelled once it is under way."""

from __future__ import annotations

from typing import Any

import trio

from hive.sink import MemorySink


async def run_and_cancel(runtime: Any, sink: MemorySink, after_lines: int = 2) -> Any:
    """The outcome of a turn ("go") of ``runtime``, cancelled once ``sink`` holds ``after_lines``
    lines of it."""

    async def cancel() -> None:
        await sink.wait_for_lines(after_lines)
        runtime.canceller().cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel)
        outcome = await runtime.run("go", sink)
    return outcome
