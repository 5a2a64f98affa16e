"""The bash tools in the test's own Trio run: `BashTools` over a `TaskManager` on a state directory
of the test's, with no daemon process, no socket and no MCP in between."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from hive.agent_socket import WakeCourier
from hive.bash import BashTools, TaskManager, TaskSettings, TaskStore


@asynccontextmanager
async def serving_tools(
    root: Path,
    *,
    store: TaskStore | None = None,
    agent_socket: Path | None = None,
    clock: Callable[[], float] = time.time,
    **settings: Any,
) -> AsyncIterator[BashTools]:
    """The tools over a manager serving ``store`` (by default one on ``root/state``), its tasks run in
    ``root``, for the duration of the block, its times told by ``clock``; ``settings`` are
    `TaskSettings`' other fields."""
    if store is None:
        store = TaskStore(root / "state")
    store.create_dirs()
    manager = TaskManager(
        store, TaskSettings(workdir=root, **settings), WakeCourier(agent_socket=agent_socket), clock=clock
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.serve)
        yield BashTools(manager, clock)
        nursery.cancel_scope.cancel()
