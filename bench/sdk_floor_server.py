"""The SDK floor of benchmark 3: the `mcp` SDK's own high-level server on Trio, as a stdio server.

``MCPServer`` (mcp 2's name for FastMCP), run by ``anyio.run(..., backend="trio")``, with two
trivial tools of the same names and arguments as hive's:

- ``run(cmd, wait_seconds=3)`` starts ``bash -c CMD`` with ``trio.run_process`` in a nursery
  (stdin, stdout and stderr ``/dev/null``), keeps the task in a dict in memory, and waits up to
  ``wait_seconds`` for its end (not at all for 0);
- ``status(id, wait_seconds=0)`` waits up to ``wait_seconds`` on the task's ``trio.Event``.

Both answer ``{"id", "state", "exit_code"}`` as structured content. Nothing is written to disk,
no task outlives the server, no end is owed to anyone: this is the cheapest way the SDK serves
the same calls, which is what hive's relay and daemon are measured against.

Run it as ``python bench/sdk_floor_server.py`` with an MCP client on its stdio.
"""

from __future__ import annotations

import itertools
import subprocess
from typing import Any

import anyio
import trio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bash-floor")


class _Task:
    def __init__(self) -> None:
        self.ended = trio.Event()
        self.exit_code: int | None = None


class _Table:
    """The tasks, in memory, and the nursery their processes run in."""

    def __init__(self) -> None:
        self.tasks: dict[str, _Task] = {}
        self.ids = itertools.count(1)
        self.nursery: trio.Nursery | None = None


_table = _Table()


async def _supervise(task: _Task, cmd: str) -> None:
    done = await trio.run_process(
        ["bash", "-c", cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    task.exit_code = done.returncode
    task.ended.set()


async def _answer(task_id: str, task: _Task, wait_seconds: float) -> dict[str, Any]:
    if wait_seconds > 0:
        with trio.move_on_after(min(wait_seconds, 30.0)):
            await task.ended.wait()
    state = "done" if task.ended.is_set() else "running"
    return {"id": task_id, "state": state, "exit_code": task.exit_code}


@server.tool()
async def run(cmd: str, wait_seconds: float = 3.0) -> dict[str, Any]:
    """Run a command with bash in the background; wait up to wait_seconds for it to end."""
    assert _table.nursery is not None
    task_id = str(next(_table.ids))
    task = _table.tasks[task_id] = _Task()
    _table.nursery.start_soon(_supervise, task, cmd)
    return await _answer(task_id, task, wait_seconds)


@server.tool()
async def status(id: str, wait_seconds: float = 0.0) -> dict[str, Any]:
    """The state of a task `run` started; wait up to wait_seconds for its end."""
    return await _answer(id, _table.tasks[id], wait_seconds)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        _table.nursery = nursery
        await server.run_stdio_async()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, backend="trio")
