"""Starting the subagent daemon on first use, for ``hive-subagent-mcp``.

A daemon is started as ``python -m hive.subagent.daemon --detach`` in a session of its own (it
forks, so it is no child of the relay, which it outlives), its log in
``<state>/subagent-daemon.log``; it says ``ready`` on a pipe once it serves. The relay that
starts it holds ``<state>/subagent-daemon.starting`` (flock) until then: a second relay finding
no daemon waits on that lock, then finds the socket served and starts none. Blocking and
standard library only: the relay has no event loop.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from hive._when import in_seconds
from hive.errors import HiveError

if TYPE_CHECKING:
    from pathlib import Path

LOG = "subagent-daemon.log"
STARTING = "subagent-daemon.starting"
START_WITHIN = 60.0
"""How long a relay waits for a daemon to serve, another relay's start of it included (imports
on a busy machine included)."""


class CannotStart(HiveError):
    """The daemon cannot be started (the message says why and what to do)."""


def open_log(state_dir: str) -> tuple[str, IO[bytes]]:
    """The daemon's log, opened to append: created 0600 in a 0700 state dir, never through a symlink."""
    from hive._files import open_append

    path, fd = _open_private(state_dir, LOG, open_append, "its log")
    return path, os.fdopen(fd, "ab")  # closed by the caller


def _open_private(state_dir: str, name: str, opener: Callable[[Path], int], what: str) -> tuple[str, int]:
    from pathlib import Path

    from hive._files import ensure_private_dir

    path = os.path.join(state_dir, name)
    try:
        ensure_private_dir(Path(state_dir))
        return path, opener(Path(path))
    except OSError as exc:
        raise CannotStart(
            f"cannot open {what} {path}: {exc}; move whatever is there away (hive keeps its own file "
            "there), or give hive-subagent-mcp another --state-dir"
        ) from None


class _Starting:
    """The starting lock, held by the relay that starts the daemon until the daemon serves."""

    def __init__(self, state_dir: str) -> None:
        from hive._files import open_lock

        self.fd = _open_private(state_dir, STARTING, open_lock, "the starting lock")[1]
        self._taken = threading.Event()
        self._guard = threading.Lock()
        self._abandoned = False

    def take(self, deadline: float) -> bool:
        """Hold the lock once another relay's start lets go of it; False if ``deadline`` came
        first (the lock is then let go of as soon as it is had)."""
        threading.Thread(target=self._flock, name="hive-subagent-starting", daemon=True).start()
        self._taken.wait(max(0.0, deadline - time.monotonic()))
        with self._guard:
            self._abandoned = not self._taken.is_set()
        return not self._abandoned

    def _flock(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        with self._guard:
            if self._abandoned:
                os.close(self.fd)
            self._taken.set()

    def __enter__(self) -> _Starting:
        return self

    def __exit__(self, *_: object) -> None:
        with self._guard:
            if not self._abandoned:
                os.close(self.fd)


def start_daemon(state_dir: str, sock: str) -> str | None:
    """Start a daemon on ``sock``, unless the start of another relay that held the starting lock
    before this one made it serve, and wait until one serves it; why none does, else None."""
    deadline = time.monotonic() + START_WITHIN
    within = in_seconds(START_WITHIN)
    try:
        log_path, log_file = open_log(state_dir)
        with log_file, _Starting(state_dir) as starting:
            if not starting.take(deadline):
                return f"another hive-subagent-mcp has been starting it for over {within} (see {log_path})"
            if not _serves(sock) and not _spawn(state_dir, sock, log_file, deadline):
                return f"the one started did not get ready within {within} (see {log_path})"
    except CannotStart as exc:
        return f"it cannot be started: {exc}"
    return None if _serves(sock) else f"none could be started there (see {log_path})"


def _spawn(state_dir: str, sock: str, log: IO[bytes], deadline: float) -> bool:
    """Start a daemon and wait for it to serve or give up; False if ``deadline`` came first."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "CLAUDECODE")}
    argv = [sys.executable, "-m", "hive.subagent.daemon", "--state-dir", state_dir]
    argv += ["--socket", sock, "--ready-fd", "1", "--detach"]
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True
    )
    assert process.stdout is not None
    # The process started forks the daemon and exits at once (so the daemon is nobody's child
    # here); the pipe ends once the daemon serves, or has given up.
    with process.stdout as said:
        ended = _read_to_end(said.fileno(), deadline)
    process.wait()
    return ended


def _read_to_end(fd: int, deadline: float) -> bool:
    """Read ``fd`` to its end; False if the deadline came first."""
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0] and not os.read(fd, 64):
            return True
    return False


def _serves(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
    return True
