"""Shared fixtures: short temporary directories, a real daemon process, the real relay, an agent socket."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hive.bash import _cgroups
from hive.bash._launch import DaemonProcess, running_daemon
from hive.wake import AgentRequest, Wake, serve_agent_socket

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Unix socket paths are limited to 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="hive-t-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def relay_argv(socket_path: Path) -> list[str]:
    return [sys.executable, "-m", "hive.bash.relay", "--socket", str(socket_path)]


@attrs.define
class DaemonHandle:
    root: Path
    state_dir: Path
    socket: Path
    agent_socket: Path
    process: DaemonProcess | None = None
    stderr_path: Path | None = None

    def args(self, *extra: str, agent: bool = True) -> list[str]:
        args = ["--state-dir", str(self.state_dir), "--socket", str(self.socket), "--workdir", str(self.root)]
        if agent:
            args += ["--agent-socket", str(self.agent_socket)]
        return [*args, *extra]

    def stderr_text(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path and self.stderr_path.exists() else ""

    @asynccontextmanager
    async def running(
        self, *extra: str, agent: bool = True, stop: bool = True, wrapper: Sequence[str] = ()
    ) -> AsyncIterator[DaemonProcess]:
        """Run the daemon with these extra flags for the duration of the block."""
        self.stderr_path = self.root / "daemon.err"
        with open(self.stderr_path, "ab") as err:
            async with running_daemon(
                self.args(*extra, agent=agent), stderr=err, stop_on_exit=stop, wrapper=wrapper
            ) as process:
                self.process = process
                yield process

    @asynccontextmanager
    async def session(self) -> AsyncIterator[ClientSession]:
        """An MCP client session through the real relay (the SDK's stdio client spawns it)."""
        argv = relay_argv(self.socket)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        with open(self.root / "relay.err", "a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session

    def task_file(self, task_id: str, suffix: str) -> Path:
        return self.state_dir / "bash-tasks" / f"{task_id}{suffix}"

    def loose_end(self, task_id: str) -> Path:
        return self.state_dir / "mcp-loose-ends" / f"bash-task-{task_id}.json"


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonHandle]:
    handle = DaemonHandle(
        root=short_tmp,
        state_dir=short_tmp / "state",
        socket=short_tmp / "bash.sock",
        agent_socket=short_tmp / "agent.sock",
    )
    yield handle
    remove_task_cgroups(handle.state_dir)


def task_cgroup_parent(state_dir: Path) -> Path | None:
    """Where a daemon started by this test process puts the cgroups of ``state_dir``'s tasks."""
    own = _cgroups.own_cgroup_dir()
    return None if own is None else own / _cgroups.task_parent_name(state_dir)


def remove_task_cgroups(state_dir: Path) -> None:
    """What a test's daemon left of its task cgroups (a crashed daemon, a task left running)
    is killed and removed, so that no test leaves cgroups behind on the machine."""
    parent = task_cgroup_parent(state_dir)
    if parent is None or not parent.is_dir():
        return
    for name in _cgroups.leftovers(parent):
        cgroup = parent / name
        while killed := _cgroups.kill_all(cgroup):
            _wait_exits(killed)
        _cgroups.remove(cgroup)
    _cgroups.remove(parent)


def _wait_exits(pids: list[int]) -> None:
    """Wait (up to 10 s) for these processes to exit, on their pidfds."""
    poller = select.poll()
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
            poller.register(fds[-1], select.POLLIN)
    try:
        for _fd, _event in poller.poll(10_000):
            pass
    finally:
        for fd in fds:
            os.close(fd)


@attrs.define
class AgentListener:
    """A stand-in for the harness: serves the agent socket and collects the wakes it is sent."""

    path: Path
    wakes: list[Wake] = attrs.field(factory=list)
    _arrived: trio.Event = attrs.field(factory=trio.Event)
    refuse: bool = False

    refusals: int = 0

    async def _take(self, request: AgentRequest) -> None:
        if self.refuse:
            self.refusals += 1
            self._signal()
            raise RuntimeError("refusing on purpose")
        if isinstance(request, Wake):
            self.wakes.append(request)
            self._signal()

    def _signal(self) -> None:
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for_refusals(self, count: int) -> None:
        while self.refusals < count:
            await self._arrived.wait()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, self.path, self._take)
            yield
            nursery.cancel_scope.cancel()

    async def wait_for(self, count: int) -> list[Wake]:
        """Wait until ``count`` wakes have arrived in all."""
        while len(self.wakes) < count:
            await self._arrived.wait()
        return self.wakes

    def senders(self) -> list[str]:
        return [w.sender for w in self.wakes]


@pytest.fixture
def agent(daemon: DaemonHandle) -> AgentListener:
    return AgentListener(daemon.agent_socket)


async def call(session: ClientSession, tool: str, **arguments: Any) -> types.CallToolResult:
    return await session.call_tool(tool, arguments)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, text_of(result)
    return dict(result.structured_content)


def group_alive(pgid: int) -> bool:
    from hive.bash._procs import group_members

    return bool(group_members(pgid))
