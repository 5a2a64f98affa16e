"""Starting the subagent daemon on first use, for ``hive-subagent-mcp``.

A daemon is started as ``python -m hive.subagent.daemon --detach`` in a session of its own (it
forks, so it is no child of the relay, which it outlives), its log in
``<state>/subagent-daemon.log``; it says ``ready`` on a pipe once it serves. Two relays starting
one at once are fine: the second daemon finds the state directory taken and exits, and its
starter connects to the first. Blocking and standard library only: the relay has no event loop.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from typing import IO

from hive._when import in_seconds
from hive.errors import HiveError

LOG = "subagent-daemon.log"
RACE_RETRIES = 40
RACE_PAUSE = 0.05
START_WITHIN = 60.0
"""How long a starting daemon may take to say it is ready (imports on a busy machine included)."""


class CannotStart(HiveError):
    """The daemon cannot be started (the message says why and what to do)."""


def open_log(state_dir: str) -> tuple[str, IO[bytes]]:
    """The daemon's log, opened to append: created 0600 in a 0700 state dir, never through a symlink."""
    from pathlib import Path

    from hive._files import ensure_private_dir, open_append

    path = os.path.join(state_dir, LOG)
    try:
        ensure_private_dir(Path(state_dir))
        return path, os.fdopen(open_append(Path(path)), "ab")  # closed by the caller
    except OSError as exc:
        raise CannotStart(
            f"cannot open its log {path}: {exc}; move whatever is there away (hive keeps its own log "
            "there), or give hive-subagent-mcp another --state-dir"
        ) from None


def start_daemon(state_dir: str, sock: str) -> str | None:
    """Start a daemon on ``sock`` and wait until one serves it; why none does, else None."""
    try:
        log_path, log_file = open_log(state_dir)
    except CannotStart as exc:
        return f"it cannot be started: {exc}"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "CLAUDECODE")}
    argv = [sys.executable, "-m", "hive.subagent.daemon", "--state-dir", state_dir]
    argv += ["--socket", sock, "--ready-fd", "1", "--detach"]
    with log_file as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    assert process.stdout is not None
    # The process started forks the daemon and exits at once (so the daemon is nobody's child
    # here); the pipe ends once the daemon serves, or has given up.
    with process.stdout as said:
        ended = _read_to_end(said.fileno(), time.monotonic() + START_WITHIN)
    process.wait()
    if not ended:
        return f"the one started did not get ready within {in_seconds(START_WITHIN)} (see {log_path})"
    # A daemon started at the same moment by another relay may hold the state directory (ours then
    # exits at once) and be a few milliseconds from listening: nothing announces that, so it is
    # tried again, briefly.
    for _ in range(RACE_RETRIES):
        if _serves(sock):
            return None
        time.sleep(RACE_PAUSE)
    return f"none could be started there (see {log_path})"


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
