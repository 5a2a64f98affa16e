"""The bash daemon as a real process for a test: its paths, its start and stop, MCP sessions through
the real relay, and what its tasks left behind (their cgroups)."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
from mcp.client.session import ClientSession

from hive.bash import DaemonProcess, running_daemon
from hive.bash.procs import _cgroups
from tests.helpers.mcp_stdio import argv_params, stdio_session

REPO = Path(__file__).resolve().parent.parent.parent
READY_WITHIN = 60.0
"""A guard only: how long a daemon may take to say READY=1."""


def short_tmp_dir() -> Path:
    """A new temporary directory with a short path: Unix socket paths are limited to 107 bytes."""
    return Path(tempfile.mkdtemp(prefix="hive-t-", dir="/tmp"))


def tail_follow_argv(task: str, *where: str, flag: str = "-f") -> list[str]:
    """The command line of ``hive bash tail -f task``, its daemon found by ``where`` (``--socket
    PATH`` or ``--state-dir PATH``)."""
    return [sys.executable, "-m", "hive.cli", "bash", "tail", flag, task, *where]


def relay_argv(socket_path: Path) -> list[str]:
    """The command line of the real relay (``hive-bash-mcp``) to ``socket_path``."""
    return [sys.executable, "-m", "hive.bash.relay", "--socket", str(socket_path)]


@attrs.define
class DaemonHandle:
    """The paths of one test's daemon, and its start (`running`) and sessions (`session`)."""

    root: Path
    state_dir: Path
    socket: Path
    agent_socket: Path
    process: DaemonProcess | None = None
    stderr_path: Path | None = None

    @classmethod
    def under(cls, root: Path) -> DaemonHandle:
        """A daemon whose state, sockets and working directory are all under ``root``."""
        return cls(
            root=root, state_dir=root / "state", socket=root / "bash.sock", agent_socket=root / "agent.sock"
        )

    def args(self, *extra: str, agent: bool = True) -> list[str]:
        """Its command line: its paths, then ``extra``."""
        args = ["--state-dir", str(self.state_dir), "--socket", str(self.socket), "--workdir", str(self.root)]
        if agent:
            args += ["--agent-socket", str(self.agent_socket)]
        return [*args, *extra]

    def stderr_text(self) -> str:
        """What the daemon has written to its stderr so far."""
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
        async with stdio_session(argv_params(relay_argv(self.socket)), self.root / "relay.err") as session:
            yield session

    def task_file(self, task_id: str, suffix: str) -> Path:
        """The file of ``task_id``'s current run with this suffix (``.json``, ``.out``, ...)."""
        return self.state_dir / "bash-tasks" / f"{task_id}{suffix}"

    def loose_end(self, task_id: str) -> Path:
        """Where the loose end of ``task_id``'s latest run is."""
        return self.state_dir / "mcp-loose-ends" / f"bash-task-{task_id}.json"


@contextlib.contextmanager
def shared_daemon(*extra: str, agent: bool = False) -> Iterator[DaemonHandle]:
    """A daemon process for a whole module of tests that each need only one that serves: started
    once (its READY=1 awaited), stopped with SIGINT at the end. With ``agent``, it sends wakes to
    its ``agent_socket`` (each test serves it while it runs); without, it sends none.

    Its tests share its state: each uses task names of its own and asserts nothing about the
    tasks of others (`list` shows them all); with ``agent``, each waits for every wake its own
    tasks owe, so that none is left for the next."""
    handle = DaemonHandle.under(short_tmp_dir())
    handle.stderr_path = handle.root / "daemon.err"
    notify_path = handle.root / "notify"
    try:
        with (
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify,
            open(handle.stderr_path, "ab") as err,
        ):
            notify.bind(str(notify_path))
            process = subprocess.Popen(
                [sys.executable, "-m", "hive.bash.daemon", *handle.args(*extra, agent=agent)],
                env={**os.environ, "NOTIFY_SOCKET": str(notify_path)},
                stdin=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
            try:
                _wait_ready(notify, process)
                yield handle
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
                process.wait(30)
    finally:
        remove_task_cgroups(handle.state_dir)
        shutil.rmtree(handle.root, ignore_errors=True)


def _wait_ready(notify: socket.socket, process: subprocess.Popen[bytes]) -> None:
    """Block until the daemon says READY=1 (on ``notify``) or exits, whichever comes first."""
    pidfd = os.pidfd_open(process.pid)
    try:
        poller = select.poll()
        poller.register(notify, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        while True:
            events = dict(poller.poll(READY_WITHIN * 1000))
            if not events:
                raise TimeoutError(f"hive-bash-daemon did not say READY=1 within {READY_WITHIN} s")
            if notify.fileno() in events and b"READY=1" in notify.recv(4096).split(b"\n"):
                return
            if pidfd in events:
                raise RuntimeError(
                    f"hive-bash-daemon exited with status {process.wait()} before it was ready"
                )
    finally:
        os.close(pidfd)


def task_cgroup_parent(state_dir: Path) -> Path | None:
    """Where a daemon started by this test process puts the cgroups of ``state_dir``'s tasks."""
    own = _cgroups.own_cgroup_dir()
    return None if own is None else own / _cgroups.task_parent_name(state_dir)


def remove_task_cgroups(state_dir: Path) -> None:
    """What a test's daemon left of its task cgroups (a crashed daemon, a task left running)
    is killed and removed, so that no test leaves cgroups behind on the machine."""
    parent = task_cgroup_parent(state_dir)
    if parent is not None and parent.is_dir():
        remove_cgroup_tree(parent)


def remove_cgroup_tree(cgroup: Path) -> None:
    """Kill what is in ``cgroup`` and in every cgroup below it, and remove them all."""
    for name in _cgroups.leftovers(cgroup):
        remove_cgroup_tree(cgroup / name)
    while killed := _cgroups.kill_all(cgroup):
        _wait_exits(killed)
    _cgroups.remove(cgroup)


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


def group_alive(pgid: int) -> bool:
    """Whether any process is left in process group ``pgid``."""
    from hive.bash.procs._procs import group_members

    return bool(group_members(pgid))
