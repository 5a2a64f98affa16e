"""Agent processes: started leading their own process group, stopped by SIGINT to it, never more.

Trio's own stops send SIGTERM and then SIGKILL (run_process's default deliver_cancel,
Process.aclose); an agent is never handed to them. ``AgentProcess`` is hive's own holder of
the process, its pipes as Trio streams and a pidfd to await its exit: it has no way to send
anything but SIGINT. Stopping is SIGINT to the group and waiting; an agent that ignores it
keeps running, and the caller moves on.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from hive._proc import ChildExit, GroupLeader, start_time
from hive._spawn import Process
from hive._when import in_seconds
from hive.runtime._errors import AgentUnavailable
from hive.runtime._guard import Sentinel, current_sentinel
from hive.runtime._prestart import AgentCommand, Spawned, claim, spawn, unclaimed

log = logging.getLogger(__name__)


@attrs.frozen
class SentSignal:
    """A signal hive sent to an agent: to which process group, which, and when."""

    pid: int
    signal: str
    at: float


SIGNALS_SENT: list[SentSignal] = []
"""Every signal this process sent to an agent, in order (tests read it)."""

RUNNING: set[AgentProcess] = set()
"""Every agent started and not yet reaped. An agent that ignored SIGINT may outlive the
runtime that started it; it stays referenced here, never killed, until it exits and is reaped."""


@attrs.define(eq=False)
class AgentProcess:
    """An agent process a runtime started: its pipes as Trio streams, its exit awaited on a
    pidfd, and at most one SIGINT to its process group."""

    popen: Process
    argv: tuple[str, ...]
    stdin: trio.lowlevel.FdStream | None
    stdout: trio.lowlevel.FdStream
    stderr: trio.lowlevel.FdStream
    _exit: ChildExit
    _stdin_rest: bytes = b""
    _leader: GroupLeader = attrs.field(init=False)
    _started: int | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self._leader = GroupLeader(self._exit.pidfd)

    @classmethod
    def adopt(cls, spawned: Spawned) -> AgentProcess:
        """Hold a process just spawned: its pipes as Trio streams, and a pidfd for its exit."""
        return cls(
            spawned.popen,
            spawned.argv,
            None if spawned.stdin is None else trio.lowlevel.FdStream(spawned.stdin),
            trio.lowlevel.FdStream(spawned.stdout),
            trio.lowlevel.FdStream(spawned.stderr),
            ChildExit(spawned.popen),
            spawned.stdin_rest,
        )

    @property
    def pid(self) -> int:
        """Its pid (and its process group's id: it leads a group of its own)."""
        return self.popen.pid

    def start_time(self) -> int | None:
        """Its start time (``hive._proc.start_time``), read once: with its pid, it names this
        process for those who record it. None if it has been reaped already."""
        if self._started is None:
            self._started = start_time(self.pid)
        return self._started

    @property
    def signalled(self) -> bool:
        """Whether it has been sent SIGINT (it is sent at most once: a second SIGINT makes some
        agents quit at once, without their own end of the turn)."""
        return self._leader.signalled

    @property
    def returncode(self) -> int | None:
        """Its exit status, or None while it runs (reaping it if it has just exited)."""
        return self._exit.returncode

    async def feed_stdin(self) -> None:
        """Write what of its stdin data the spawn could not, then close its stdin (nothing to
        do when the spawn wrote it all). Run beside the reading of its output, which a big
        write would otherwise wait on; an agent that goes away without reading it all ends it."""
        if not self._stdin_rest or self.stdin is None:
            return
        rest, self._stdin_rest = self._stdin_rest, b""
        try:
            await self.stdin.send_all(rest)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            with trio.CancelScope(shield=True):
                await self.stdin.aclose()

    def interrupt(self) -> bool:
        """SIGINT to the agent's process group, once; False if it was sent before or the
        agent is gone."""
        if self.returncode is not None or not self._leader.interrupt():
            return False
        SIGNALS_SENT.append(SentSignal(self.pid, "SIGINT", time.time()))
        log.info("sent SIGINT to %s (process group %d)", self.argv[0], self.pid)
        return True

    async def wait(self) -> int:
        """Wait for the agent to exit (reaping it); its exit status."""
        status = await self._exit.wait()
        RUNNING.discard(self)
        return status


AgentWatcher = Callable[[AgentProcess], None]
_watcher: contextvars.ContextVar[AgentWatcher | None] = contextvars.ContextVar("_watcher", default=None)


@contextlib.contextmanager
def watching_agents(watcher: AgentWatcher) -> Iterator[None]:
    """Call ``watcher`` with each agent process started inside the block (by this task, or by
    tasks it starts meanwhile), just after its spawn: so a caller of a runtime can tell which
    processes a turn of its own started, and wait for their exit. Blocks nest: each agent is
    handed to every watcher of the blocks it starts in, innermost first."""
    outer = _watcher.get()
    if outer is not None:
        inner = watcher

        def watcher(agent: AgentProcess) -> None:
            inner(agent)
            outer(agent)

    token = _watcher.set(watcher)
    try:
        yield
    finally:
        _watcher.reset(token)


@attrs.define(eq=False)
class AgentGroup:
    """The agent processes one runtime started. Closing it sends SIGINT to those still
    running and waits a bounded grace for them; one that ignores SIGINT is left running."""

    _agents: set[AgentProcess] = attrs.field(factory=set)

    def add(self, agent: AgentProcess) -> None:
        """Hold ``agent`` (and forget those that have exited)."""
        self._agents = {a for a in self._agents if a.returncode is None}
        self._agents.add(agent)

    async def close(self, grace: float) -> None:
        """SIGINT to each agent still running, then at most ``grace`` seconds for them to exit."""
        running = [agent for agent in self._agents if agent.returncode is None]
        self._agents.clear()
        for agent in running:
            agent.interrupt()
        with trio.move_on_after(grace, shield=True):
            for agent in running:
                await agent.wait()
        for agent in running:
            if agent.returncode is None:
                log.warning(
                    "%s (pid %d) did not exit within %s of SIGINT; it is left running",
                    agent.argv[0],
                    agent.pid,
                    in_seconds(grace),
                )


async def start_agent(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin_pipe: bool = False,
    stdin_data: bytes | None = None,
) -> AgentProcess:
    """Start an agent in a new session (so it leads its process group), its stdout and stderr
    piped, its stdin a pipe, a pipe carrying ``stdin_data`` and then closed, or ``/dev/null``;
    or adopt the one prestarted with exactly this command. With ``stdin_data``, the caller runs
    ``feed_stdin`` beside its reading of the output (it returns at once when the spawn could
    write it all, up to 1 MiB). It gets SIGINT if this process dies: its whole process group
    inside ``guarding_agents`` (from the sentinel), else its first process (from the kernel).

    The fork is made on Trio's own thread, not a worker's: the kernel sends the parent-death
    signal when the thread that forked the child exits, and Trio's idle workers exit."""
    command = AgentCommand(tuple(argv), env, stdin_pipe, stdin_data)
    spawned = claim(command, cwd=cwd)
    if spawned is None:
        await trio.lowlevel.checkpoint()
        sentinel = current_sentinel()
        try:
            spawned = spawn(
                argv,
                cwd=cwd,
                env=env,
                stdin_pipe=stdin_pipe,
                stdin_data=stdin_data,
                follow_parent=sentinel is None,
            )
        except FileNotFoundError:
            raise AgentUnavailable(
                f"cannot start {argv[0]!r}: no such executable (is it installed and on PATH?)"
            ) from None
        except PermissionError:
            raise AgentUnavailable(f"cannot start {argv[0]!r}: permission denied") from None
        except OSError as exc:
            raise AgentUnavailable(f"cannot start {argv[0]!r} in {cwd}: {exc}") from None
        return _hold(spawned, sentinel)
    return _hold(spawned)


def _hold(spawned: Spawned, sentinel: Sentinel | None = None) -> AgentProcess:
    agent = AgentProcess.adopt(spawned)
    if sentinel is not None and (started := agent.start_time()) is not None:
        sentinel.guard(agent.pid, started)
    RUNNING.add(agent)
    watcher = _watcher.get()
    if watcher is not None:
        watcher(agent)
    return agent


async def release_prestarted(grace: float) -> None:
    """SIGINT to every agent prestarted and not adopted, and at most ``grace`` for them to go."""
    group = AgentGroup()
    for spawned in unclaimed():
        group.add(_hold(spawned))
    await group.close(grace)


@attrs.define
class StderrTail:
    """The last ``limit`` bytes an agent wrote to stderr, drained as they come."""

    limit: int = 16 * 1024
    _data: bytearray = attrs.field(factory=bytearray)
    drained: trio.Event = attrs.field(factory=trio.Event)
    """Set once the stream has ended (or could no longer be read): the tail is all there is."""

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to its end, keeping its last ``limit`` bytes."""
        try:
            while chunk := await stream.receive_some(65536):
                self._data += chunk
                if len(self._data) > 2 * self.limit:
                    del self._data[: len(self._data) - self.limit]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.drained.set()

    def text(self) -> str:
        """What is kept, as text."""
        return bytes(self._data[-self.limit :]).decode("utf-8", errors="replace")
