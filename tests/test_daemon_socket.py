"""The daemon's socket over its life, as a process: gone after a clean stop, never taken from a live
daemon, and a refusal an exit status 1 with one line (tests/test_sockets.py has the rest, in-process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import trio

from tests.helpers.daemon import DaemonHandle
from tests.helpers.results import call, structured

WITHIN = 60


async def list_total(daemon: DaemonHandle) -> int:
    async with daemon.session() as session:
        total = structured(await call(session, "list"))["total"]
    assert isinstance(total, int)
    return total


async def daemon_refusing_to_start(
    daemon: DaemonHandle, state_dir: str
) -> subprocess.CompletedProcess[bytes]:
    """Run a daemon on ``daemon``'s socket with its own state directory, to its exit."""
    args = [
        "--state-dir",
        state_dir,
        "--socket",
        str(daemon.socket),
        "--workdir",
        str(daemon.root),
    ]
    return await trio.run_process(
        [sys.executable, "-m", "hive.bash.daemon", *args], capture_stderr=True, check=False
    )


async def test_a_clean_stop_by_sigint_or_sigterm_removes_the_socket_and_a_restart_serves(
    daemon: DaemonHandle,
) -> None:
    with trio.fail_after(WITHIN):
        async with daemon.running(agent=False) as process:
            assert await list_total(daemon) == 0
        assert process.returncode == 0, daemon.stderr_text()
        # A client now finds no socket (not a refused connect on a dead one).
        assert not os.path.lexists(daemon.socket)
        async with daemon.running(agent=False, stop=False) as process:
            assert await list_total(daemon) == 0
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0, daemon.stderr_text()
        assert not os.path.lexists(daemon.socket)


async def test_a_second_daemon_on_a_live_socket_is_refused_and_the_first_keeps_serving(
    served: DaemonHandle,
) -> None:
    daemon = served
    with trio.fail_after(WITHIN):
        inode = os.lstat(daemon.socket).st_ino
        second = await daemon_refusing_to_start(daemon, str(daemon.root / "other-state"))
        assert second.returncode == 2  # another owner of the state: 2, as for every program
        err = second.stderr.decode()
        assert "another server is listening on" in err
        assert str(daemon.socket) in err
        assert "--socket" in err  # what to do about it
        assert "Traceback" not in err
        assert os.lstat(daemon.socket).st_ino == inode
        assert await list_total(daemon) == 0


async def test_a_path_that_is_not_a_socket_is_refused_and_left_alone(daemon: DaemonHandle) -> None:
    daemon.socket.write_text("an operator's file, given as --socket by mistake")
    with trio.fail_after(WITHIN):
        refused = await daemon_refusing_to_start(daemon, str(daemon.state_dir))
    assert refused.returncode == 2  # a --socket that names something else: bad input
    err = refused.stderr.decode()
    assert f"{daemon.socket} exists and is not a socket" in err
    assert "Traceback" not in err
    assert daemon.socket.read_text() == "an operator's file, given as --socket by mistake"
