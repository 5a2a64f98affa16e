"""Real bash daemons forked from a process that has already imported what serving takes.

A daemon started with ``python -m hive.bash.daemon`` spends about a second importing Trio and the
MCP SDK before it serves. The tests of restarts, recovery and stops start it twice per test, and
what they prove is about the daemon's processes, signals and files, not about its imports. So a
*zygote* (one per test session, itself a fresh interpreter that has run nothing) imports them once,
and each daemon is a fork of it: a process of its own, in a session of its own, with its own
stdin, stdout, stderr, environment, working directory and command line, running the daemon's
``main`` as ``python -m`` would, from a state that has served nothing. Starting one, the
exec'd way, stays proven by the modules that use ``tests.helpers.daemon`` as it is.

The zygote is the daemons' parent: it reaps them on request, and a daemon's exit is awaited on
its pidfd, as any process's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.helpers.daemon import READY_WITHIN, REPO, DaemonHandle, remove_task_cgroups, short_tmp_dir
from tests.helpers.zygote import ZYGOTE_MESSAGE_MAX


class _Zygote:
    """The test process's end of the zygote: one request at a time, each answered at once."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.zygote", str(theirs.fileno())],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        atexit.register(self.close)

    def request(self, payload: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        with self._lock:
            socket.send_fds(self._control, [json.dumps(payload).encode()], list(fds))
            reply: dict[str, Any] = json.loads(self._control.recv(ZYGOTE_MESSAGE_MAX))
        return reply

    def close(self) -> None:
        self._control.close()
        self._process.wait(30)


_zygote: _Zygote | None = None


def _the_zygote() -> _Zygote:
    global _zygote  # noqa: PLW0603 - one per test session, started by the first daemon
    if _zygote is None:
        _zygote = _Zygote()
    return _zygote


class ForkedDaemon:
    """A daemon forked by the zygote: what ``hive.bash._launch.DaemonProcess`` offers a test
    (its pid, its exit status once it has exited, signals, its exit awaited on a pidfd)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._pidfd: int | None = os.pidfd_open(pid)
        self._status: int | None = None
        self._waiting: trio.Lock | None = None

    @property
    def returncode(self) -> int | None:
        """Its exit status, or None while it runs (reaping it if it has just exited)."""
        if self._status is None:
            self._reap(block=False)
        return self._status

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the daemon (nothing once it has exited)."""
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """Wait for it to exit (the zygote reaps it); its exit status."""
        if self._waiting is None:
            self._waiting = trio.Lock()
        async with self._waiting:
            if self._status is None and self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
                self._reap(block=True)
        assert self._status is not None
        return self._status

    def wait_blocking(self, timeout: float) -> int:
        """`wait`, outside Trio (a module's fixture)."""
        if self._status is None and self._pidfd is not None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise TimeoutError(f"daemon {self.pid} did not exit within {timeout:g} s")
            self._reap(block=True)
        assert self._status is not None
        return self._status

    def _reap(self, *, block: bool) -> None:
        status = _the_zygote().request({"op": "reap", "pid": self.pid, "block": block})["status"]
        if status is not None:
            self._status = status
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None


def fork_daemon(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    stderr: int,
    nofile: tuple[int, int] | None = None,
    user: DaemonUser | None = None,
) -> ForkedDaemon:
    """Fork a daemon with this command line and environment; stdin /dev/null, stdout the test's;
    ``nofile`` its (soft, hard) open-files limit; ``user`` who it runs as, and in which cgroup."""
    with open(os.devnull, "rb") as devnull:
        fds = (devnull.fileno(), sys.__stdout__.fileno() if sys.__stdout__ else 1, stderr)
        payload = {"op": "spawn", "args": list(args), "env": dict(env), "cwd": os.getcwd(), "nofile": nofile}
        if user is not None:
            payload |= {"user": [user.uid, user.gid], "cgroup": str(user.cgroup)}
        return ForkedDaemon(_the_zygote().request(payload, fds)["pid"])


@attrs.frozen
class DaemonUser:
    """An unprivileged daemon, as a service manager starts one with ``User=`` and
    ``Delegate=yes``: run as ``uid``/``gid``, in ``cgroup`` (which that user owns)."""

    uid: int
    gid: int
    cgroup: Path


@attrs.define
class ForkedDaemonHandle(DaemonHandle):
    """A `DaemonHandle` whose `running` forks the daemon from the zygote (with a ``wrapper``,
    which must exec the daemon, it starts it the exec'd way)."""

    @asynccontextmanager
    async def running(
        self,
        *extra: str,
        agent: bool = True,
        stop: bool = True,
        wrapper: Sequence[str] = (),
        nofile: tuple[int, int] | None = None,
    ) -> AsyncIterator[Any]:
        """Run the daemon with these extra flags for the duration of the block (READY=1 awaited);
        at its end, unless it has exited or ``stop`` is false (and the block did not fail), SIGINT,
        and its exit awaited.
        ``nofile`` is its (soft, hard) open-files limit, set before it starts, as `prlimit` would."""
        if wrapper:
            async with DaemonHandle.running(self, *extra, agent=agent, stop=stop, wrapper=wrapper) as process:
                yield process
            return
        self.stderr_path = self.root / "daemon.err"
        with (
            tempfile.TemporaryDirectory(prefix="hive-notify-") as tmp,
            open(self.stderr_path, "ab") as err,
            trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify,
        ):
            notify_path = os.path.join(tmp, "notify")
            await notify.bind(notify_path)
            env = {**os.environ, "NOTIFY_SOCKET": notify_path}
            process = fork_daemon(self.args(*extra, agent=agent), env, stderr=err.fileno(), nofile=nofile)
            self.process = process  # type: ignore[assignment]
            try:
                await _ready(notify, process)
                yield process
            except BaseException:
                stop = True  # a test that failed leaves nobody else to stop it
                raise
            finally:
                if stop and process.returncode is None:
                    process.send_signal(signal.SIGINT)
                    with trio.move_on_after(30, shield=True):
                        await process.wait()


async def _ready(notify: trio.socket.SocketType, process: ForkedDaemon) -> None:
    """Until the daemon says READY=1; fails if it exits first or is not ready in time."""
    exited: list[int] = []

    async def watch_exit(scope: trio.CancelScope) -> None:
        exited.append(await process.wait())
        scope.cancel()

    with trio.fail_after(READY_WITHIN):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_exit, nursery.cancel_scope)
            while b"READY=1" not in (await notify.recv(4096)).split(b"\n"):
                pass
            nursery.cancel_scope.cancel()
    if exited:
        raise RuntimeError(f"hive-bash-daemon exited with status {exited[0]} before it was ready")


def forked_daemon_under(root: Path) -> Iterator[ForkedDaemonHandle]:
    """The body of a test's ``daemon`` fixture: the paths of a forked daemon under ``root``
    (started by the test with ``daemon.running()``); its task cgroups removed afterwards."""
    handle = ForkedDaemonHandle.under(root)
    yield handle
    remove_task_cgroups(handle.state_dir)


@contextlib.contextmanager
def forked_shared_daemon(
    *extra: str, agent: bool = False, user: DaemonUser | None = None
) -> Iterator[DaemonHandle]:
    """`tests.helpers.daemon.shared_daemon`, forked from the zygote (run as ``user``, if given:
    its directory is then that user's)."""
    handle = ForkedDaemonHandle.under(short_tmp_dir())
    handle.stderr_path = handle.root / "daemon.err"
    notify_path = handle.root / "notify"
    try:
        with (
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify,
            open(handle.stderr_path, "ab") as err,
        ):
            notify.bind(str(notify_path))
            if user is not None:
                for path in (handle.root, handle.stderr_path, notify_path):
                    os.chown(path, user.uid, user.gid)
            env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
            process = fork_daemon(handle.args(*extra, agent=agent), env, stderr=err.fileno(), user=user)
            try:
                _ready_blocking(notify, process)
                yield handle
            finally:
                process.send_signal(signal.SIGINT)
                process.wait_blocking(30)
    finally:
        remove_task_cgroups(handle.state_dir)

        shutil.rmtree(handle.root, ignore_errors=True)


def _ready_blocking(notify: socket.socket, process: ForkedDaemon) -> None:
    assert process._pidfd is not None
    poller = select.poll()
    poller.register(notify, select.POLLIN)
    poller.register(process._pidfd, select.POLLIN)
    while True:
        events = dict(poller.poll(READY_WITHIN * 1000))
        if not events:
            raise TimeoutError(f"hive-bash-daemon did not say READY=1 within {READY_WITHIN} s")
        if notify.fileno() in events and b"READY=1" in notify.recv(4096).split(b"\n"):
            return
        if process._pidfd in events:
            raise RuntimeError(
                f"hive-bash-daemon exited with status {process.wait_blocking(1)} before it was ready"
            )
