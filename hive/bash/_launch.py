"""Starting a daemon as a child process and knowing when it is ready (systemd's READY=1).

The daemon leads a session (so a process group) of its own: a terminal's Ctrl-C, or a signal
to the starter's group, reaches the starter alone, which stops the daemon with its own SIGINT.
It is spawned on the calling thread (Trio's), not a worker's, so that a parent-death signal
(which the kernel sends when the spawning *thread* exits) holds for as long as the starter runs.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

import trio

from hive._proc import ChildExit
from hive._spawn import Process, start
from hive._when import in_seconds
from hive.bash._errors import BashError

log = logging.getLogger(__name__)


class DaemonFailedToStart(BashError):
    """A daemon exited before it was ready, or was not ready (READY=1) in time; the message says which.

    ``signal``: the signal it died of before it was ready, if it did (not a setting of its: another
    process ended it)."""

    def __init__(self, message: str, *, signal: int | None = None) -> None:
        super().__init__(message)
        self.signal = signal


class DaemonProcess:
    """A daemon started by ``running_daemon``: its pid, its exit awaited on a pidfd."""

    def __init__(self, popen: Process) -> None:
        self.popen = popen
        self._exit = ChildExit(popen)

    @property
    def pid(self) -> int:
        """Its process id."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status, or None while it runs."""
        return self._exit.returncode

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the daemon (nothing once it has exited)."""
        self._exit.pidfd.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL it (for tests of a daemon's crash: hive never sends it)."""
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        """Wait for it to exit (reaping it); its exit status."""
        return await self._exit.wait()


@asynccontextmanager
async def running_daemon(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stderr: int | IO[bytes] | None = None,
    stop_on_exit: bool = True,
    ready_within: float = 60.0,
    wrapper: Sequence[str] = (),
    module: str = "hive.bash.daemon",
    name: str = "hive-bash-daemon",
    cwd: Path | None = None,
    death_signal: int | None = None,
) -> AsyncIterator[DaemonProcess]:
    """Run ``hive-bash-daemon args`` until the block ends; it is listening once the block starts.

    On exit the daemon gets SIGINT (unless it has already exited, or ``stop_on_exit`` is
    false and the block ended without an exception) and is waited for; its tasks keep running, as they do after any daemon stop.
    ``wrapper`` is a command line to start the daemon under (it must exec the daemon).
    ``module`` and ``name`` run another of hive's programs that says READY=1 (`hive demo`
    runs hive-agent so), in ``cwd``. ``death_signal``: the daemon is sent it when the calling
    thread exits (see ``hive._spawn``).
    """
    with tempfile.TemporaryDirectory(prefix="hive-notify-") as tmp:
        notify_path = Path(tmp) / "notify"
        notify = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with notify:
            await notify.bind(os.fspath(notify_path))
            child_env = {**(os.environ if env is None else env), "NOTIFY_SOCKET": os.fspath(notify_path)}
            await trio.lowlevel.checkpoint()
            # On this thread, not a worker's (see the module's docstring); the spawn is brief.
            popen = start(
                [*wrapper, sys.executable, "-m", module, *args],
                env=child_env,
                stdio=(-1, -1, _descriptor(stderr)),
                cwd=cwd,
                death_signal=death_signal,
            )
            process = DaemonProcess(popen)
            stop = stop_on_exit
            try:
                await _wait_ready(notify, process, ready_within, name)
                yield process
            except BaseException:
                stop = True  # a block that failed leaves nobody else to stop it
                raise
            finally:
                if stop and process.returncode is None:
                    process.send_signal(signal.SIGINT)
                    with trio.move_on_after(30, shield=True) as scope:
                        await process.wait()
                    if scope.cancelled_caught:
                        log.error("%s (pid %d) did not exit within 30 s of SIGINT", name, process.pid)


def _descriptor(stream: int | IO[bytes] | None) -> int:
    """The descriptor ``stream`` is (-1, this process's own, for None)."""
    return -1 if stream is None else stream if isinstance(stream, int) else stream.fileno()


async def _wait_ready(
    notify: trio.socket.SocketType, process: DaemonProcess, within: float, name: str
) -> None:
    exit_code: int | None = None

    async def watch_exit(cancel_scope: trio.CancelScope) -> None:
        nonlocal exit_code
        exit_code = await process.wait()
        cancel_scope.cancel()

    with trio.move_on_after(within) as waited:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_exit, nursery.cancel_scope)
            while b"READY=1" not in (await notify.recv(4096)).split(b"\n"):
                pass
            nursery.cancel_scope.cancel()
    if waited.cancelled_caught:
        raise DaemonFailedToStart(f"{name} was not ready within {in_seconds(within)}")
    if exit_code is not None:
        raise DaemonFailedToStart(
            f"{name} exited with status {exit_code} before it was ready",
            signal=-exit_code if exit_code < 0 else None,
        )
