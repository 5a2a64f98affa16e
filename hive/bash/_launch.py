"""Starting a daemon as a child process and knowing when it is ready (systemd's READY=1)."""

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

log = logging.getLogger(__name__)


class DaemonFailedToStart(RuntimeError):
    pass


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
) -> AsyncIterator[trio.Process]:
    """Run ``hive-bash-daemon args`` until the block ends; it is listening once the block starts.

    On exit the daemon gets SIGINT (unless it has already exited or ``stop_on_exit`` is
    false) and is waited for; its tasks keep running, as they do after any daemon stop.
    ``wrapper`` is a command line to start the daemon under (it must exec the daemon).
    ``module`` and ``name`` run another of hive's programs that says READY=1 (`hive demo`
    runs hive-agent so), in ``cwd``.
    """
    with tempfile.TemporaryDirectory(prefix="hive-notify-") as tmp:
        notify_path = Path(tmp) / "notify"
        notify = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with notify:
            await notify.bind(os.fspath(notify_path))
            child_env = {**(os.environ if env is None else env), "NOTIFY_SOCKET": os.fspath(notify_path)}
            process = await trio.lowlevel.open_process(
                [*wrapper, sys.executable, "-m", module, *args], env=child_env, stderr=stderr, cwd=cwd
            )
            try:
                await _wait_ready(notify, process, ready_within, name)
                yield process
            finally:
                if stop_on_exit and process.returncode is None:
                    process.send_signal(signal.SIGINT)
                    with trio.move_on_after(30, shield=True) as scope:
                        await process.wait()
                    if scope.cancelled_caught:
                        log.error("%s (pid %d) did not exit within 30 s of SIGINT", name, process.pid)


async def _wait_ready(
    notify: trio.socket.SocketType, process: trio.Process, within: float, name: str
) -> None:
    exit_code: int | None = None

    async def watch_exit(cancel_scope: trio.CancelScope) -> None:
        nonlocal exit_code
        exit_code = await process.wait()
        cancel_scope.cancel()

    with trio.fail_after(within):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_exit, nursery.cancel_scope)
            while b"READY=1" not in (await notify.recv(4096)).split(b"\n"):
                pass
            nursery.cancel_scope.cancel()
    if exit_code is not None:
        raise DaemonFailedToStart(f"{name} exited with status {exit_code} before it was ready")
