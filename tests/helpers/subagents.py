"""What the subagent tests share: fake agents for subagents, a manager in the test's Trio run, waits."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters

from fixtures import acp_agent
from hive.agent_socket import Wake
from hive.subagent import Caller, Phase, Store, SubagentManager, SystemHost, TurnAgent
from tests.helpers import inotify
from tests.helpers.acp_fake import FakeAcp
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.mcp_stdio import stdio_session

INTERRUPTED_IN_BASH = [
    {"init": {}},
    {"tool_use": {"name": "Bash", "input": {"command": "sleep 100"}}},
    {"wait_for_signal": "SIGINT"},
    {"interrupted": "tool"},
    {"exit": 1},
]
"""A fake claude's turn that runs a long Bash call and, at SIGINT, ends it as interrupted."""


def clean_environ() -> dict[str, str]:
    """This process's environment without anything that would pick another runtime or agent."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HIVE_", "FAKE_", "CLAUDE", "ANTHROPIC")) and k != "NOTIFY_SOCKET"
    }


@attrs.define
class World:
    """A state directory, a fake claude and a fake ACP agent for subagents, an agent socket."""

    root: Path
    claude: FakeClaude
    acp: FakeAcp

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def store(self) -> Store:
        return Store(self.state)

    @property
    def agent_socket(self) -> Path:
        return self.root / "agent.sock"

    def env(self) -> dict[str, str]:
        acp_env = {k: v for k, v in self.acp.spec().env}
        return {
            **clean_environ(),
            **dict(self.claude.env()),
            "HIVE_CLAUDE_COMMAND": str(self.claude.executable),
            "HIVE_ACP_COMMAND": sys.executable,
            "HIVE_ACP_ARGS": json.dumps([acp_agent.PATH]),
            "HIVE_ACP_ENV": json.dumps(acp_env),
        }

    def caller(self, *, wakes: bool = True, **changes: Any) -> Caller:
        return Caller(
            cwd=str(self.root),
            env=self.env(),
            agent_socket=str(self.agent_socket) if wakes else None,
            **changes,
        )

    def log(self, name: str) -> list[dict[str, Any]]:
        try:
            text = self.store.log_path(name).read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@contextmanager
def world_in(short_tmp: Path) -> Iterator[World]:
    """For a test file's ``world`` fixture; fakes left running are stopped at its end."""
    claude = FakeClaude(short_tmp).install()
    acp = FakeAcp(short_tmp)
    world = World(short_tmp, claude, acp)
    try:
        yield world
    finally:
        claude.cleanup()
        acp.cleanup()


@attrs.define(eq=False)
class RecordingHost(SystemHost):
    """Real processes, and every agent a turn started kept for the test to look at."""

    agents: list[TurnAgent] = attrs.field(factory=list)

    @contextmanager
    def watching(self, watcher: Callable[[TurnAgent], None]) -> Iterator[None]:
        def seen(agent: TurnAgent) -> None:
            self.agents.append(agent)
            watcher(agent)

        with SystemHost.watching(self, seen):
            yield


@asynccontextmanager
async def serving(world: World, **options: Any) -> AsyncIterator[SubagentManager]:
    """A manager on the world's state directory, serving in this Trio run for the block."""
    options.setdefault("host", RecordingHost())
    manager = SubagentManager(world.store, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.serve)
        yield manager
        nursery.cancel_scope.cancel()


async def wait_for_slot(manager: SubagentManager, name: str, phase: Phase | None) -> None:
    """Until the slot of ``name`` is ``phase`` (None: free)."""
    while (manager.slots[name].phase if name in manager.slots else None) is not phase:
        await manager.changed()


async def wait_until(world: World, check: Callable[[], Any]) -> Any:
    """Until ``check()`` is true: it reads a file another process writes (a fake's record in the
    world's root, a turn log in its sessions), read again whenever one of those directories changes."""
    return await inotify.wait_until(check, world.root, world.store.sessions)


async def turn_done(manager: SubagentManager, name: str) -> None:
    """Until the task of ``name``'s latest turn is done (its end recorded, its agents dropped)."""
    live = manager.live.get(name)
    if live is not None:
        await live.done.wait()


def daemon_pid(state: Path) -> int | None:
    """The pid of the daemon serving ``state`` (it writes it into its lock file), if one started."""
    try:
        text = (state / "subagent-daemon.lock").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


async def stop_daemon(state: Path) -> None:
    """SIGINT to the daemon a server started on first use, and wait for it to go."""
    pid = daemon_pid(state)
    if pid is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGINT)
        with trio.fail_after(60):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def server_params(world: World, **env: str) -> StdioServerParameters:
    """``hive-subagent-mcp`` (the venv's console script) for the world, as an MCP client spawns it."""
    full = {
        **world.env(),
        "HIVE_STATE_DIR": str(world.state),
        "HIVE_AGENT_SOCKET": str(world.agent_socket),
        **env,
    }
    script = Path(sys.executable).parent / "hive-subagent-mcp"
    return StdioServerParameters(command=str(script), args=[], env=full, cwd=str(world.root))


@asynccontextmanager
async def mcp_session(world: World, **env: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with ``hive-subagent-mcp``, through the SDK's own stdio client."""
    async with stdio_session(server_params(world, **env), world.root / "server.err") as session:
        yield session


def tool_use_seen(world: World, name: str) -> bool:
    return any(line.get("type") == "assistant" and "tool_use" in str(line) for line in world.log(name))


@attrs.define(eq=False)
class Courier:
    """Keeps the wakes it is given; delivers none."""

    sent: list[tuple[str, Wake]] = attrs.field(factory=list)
    withdrawn: list[str] = attrs.field(factory=list)
    arrived: trio.Event = attrs.field(factory=trio.Event)

    def send(self, key: str, socket: Path, wake: Wake) -> None:
        self.sent.append((key, wake))
        self.arrived.set()

    def withdraw(self, key: str) -> None:
        self.withdrawn.append(key)

    def start(self, nursery: trio.Nursery) -> None:
        pass
