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

With ``--durable DIR`` it is the *durable* floor: what hive must do at the least to lose nothing
on a crash. Before a task's process starts, its record (``<id>.json``) and its loose end
(``<id>.owed``) are written to a temporary file, fsynced and renamed into DIR, and DIR fsynced;
the writes of all the tasks that start in one pass of the event loop share one worker thread and
one directory fsync (a group commit, as hive's daemon does). The command runs under a shell that
writes its exit status to ``<id>.exit``; at its end the record is rewritten (not fsynced), and
an answer that reports the end removes the loose end (told).

Run it as ``python bench/sdk_floor_server.py [--durable DIR]`` with an MCP client on its stdio.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import trio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bash-floor")


class _Task:
    def __init__(self) -> None:
        self.ended = trio.Event()
        self.exit_code: int | None = None


class _GroupCommit:
    """Durable writes of whole files into one directory: each batch (whatever was queued when
    the worker thread became free) is written, fsynced and renamed, then the directory fsynced once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.queued: list[tuple[str, bytes]] = []
        self.done: list[trio.Event] = []
        self.wake = trio.Event()

    async def write(self, files: list[tuple[str, bytes]]) -> None:
        done = trio.Event()
        self.queued += files
        self.done.append(done)
        self.wake.set()
        await done.wait()

    async def serve(self) -> None:
        while True:
            await self.wake.wait()
            self.wake = trio.Event()
            batch, done, self.queued, self.done = self.queued, self.done, [], []
            await trio.to_thread.run_sync(self._write, batch)
            for event in done:
                event.set()

    def _write(self, batch: list[tuple[str, bytes]]) -> None:
        for name, data in batch:
            temporary = self.directory / f".{name}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, self.directory / name)
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _Table:
    """The tasks, in memory, and the nursery their processes run in."""

    def __init__(self) -> None:
        self.tasks: dict[str, _Task] = {}
        self.ids = itertools.count(1)
        self.nursery: trio.Nursery | None = None
        self.durable: _GroupCommit | None = None


_table = _Table()


def _record(task_id: str, cmd: str, state: str, exit_code: int | None) -> bytes:
    return json.dumps({"id": task_id, "cmd": cmd, "state": state, "exit_code": exit_code}).encode()


async def _supervise(task_id: str, task: _Task, cmd: str) -> None:
    argv = ["bash", "-c", cmd]
    durable = _table.durable
    if durable is not None:
        exit_path = shlex.quote(str(durable.directory / f"{task_id}.exit"))
        # The command, then its status, in the same shell (hive's wrapper does the same).
        argv = ["bash", "-c", f'{cmd}\nrc=$?; printf "%s\\n" "$rc" > {exit_path}; exit "$rc"']
    done = await trio.run_process(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    task.exit_code = done.returncode
    if durable is not None:
        (durable.directory / f"{task_id}.json").write_bytes(_record(task_id, cmd, "done", task.exit_code))
    task.ended.set()


async def _answer(task_id: str, task: _Task, wait_seconds: float) -> dict[str, Any]:
    if wait_seconds > 0:
        with trio.move_on_after(min(wait_seconds, 30.0)):
            await task.ended.wait()
    state = "done" if task.ended.is_set() else "running"
    if state == "done" and _table.durable is not None:
        (_table.durable.directory / f"{task_id}.owed").unlink(missing_ok=True)  # told
    return {"id": task_id, "state": state, "exit_code": task.exit_code}


@server.tool()
async def run(cmd: str, wait_seconds: float = 3.0) -> dict[str, Any]:
    """Run a command with bash in the background; wait up to wait_seconds for it to end."""
    assert _table.nursery is not None
    task_id = str(next(_table.ids))
    task = _table.tasks[task_id] = _Task()
    if _table.durable is not None:
        owed = json.dumps({"task_id": task_id}).encode()
        await _table.durable.write(
            [(f"{task_id}.json", _record(task_id, cmd, "running", None)), (f"{task_id}.owed", owed)]
        )
    _table.nursery.start_soon(_supervise, task_id, task, cmd)
    return await _answer(task_id, task, wait_seconds)


@server.tool()
async def status(id: str, wait_seconds: float = 0.0) -> dict[str, Any]:
    """The state of a task `run` started; wait up to wait_seconds for its end."""
    return await _answer(id, _table.tasks[id], wait_seconds)


async def main() -> None:
    async with trio.open_nursery() as nursery:
        _table.nursery = nursery
        if _table.durable is not None:
            nursery.start_soon(_table.durable.serve)
        await server.run_stdio_async()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--durable"]:
        _table.durable = _GroupCommit(Path(sys.argv[2]))
        _table.durable.directory.mkdir(parents=True, exist_ok=True)
    anyio.run(main, backend="trio")
