"""The state directory: where it is when nobody says, and the lock that makes a program its one user.

Where: ``HIVE_STATE_DIR``, else ``$XDG_STATE_HOME/hive``, else ``~/.local/state/hive``. Each
program that owns state there (``hive-agent``, ``hive-bash-daemon``, the subagent daemon) holds a
lock file of its own in it, flocked for as long as it runs and holding its pid, so that another
one started on the same directory is refused with a message that names the holder. The lock is
opened as every state file is (``hive._files``: no symlink followed, no FIFO blocked on, 0600).

Standard library only (with ``hive._files`` and ``hive.errors``): the operator CLI computes the
default before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from hive._files import ensure_private_dir, read_regular, try_lock
from hive._limits import state_dir_path
from hive.errors import BadInput, HiveError, StateBusy

log = logging.getLogger(__name__)

ANOTHER = "stop it, or give this one another --state-dir"
"""What a program refused for a busy state directory is told to do, unless it says otherwise."""


def default_state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The state directory when none is given (`hive._limits.state_dir_path`)."""
    return Path(state_dir_path(env))


class StateDirBusy(StateBusy):
    """Another program of the same kind holds the state directory's lock."""

    def __init__(self, state_dir: Path, lock: Path, holder: str, advice: str, pid: int | None) -> None:
        self.state_dir, self.lock, self.holder, self.pid = state_dir, lock, holder, pid
        who = "it" if pid is None else f"pid {pid}"
        super().__init__(f"another {holder} is using {state_dir} ({who} holds {lock}); {advice}")


class StateDirUnusable(HiveError, OSError):
    """The lock file of the state directory cannot be opened (a symlink or a FIFO planted there,
    a directory in its place, no permission)."""


class BadStateDir(BadInput):
    """The state directory is not a directory, or cannot be made: the path given is wrong (exit 2)."""


def make_state_dir(state_dir: Path, *, holder: str) -> Path:
    """``state_dir``, made 0700 (with its parents) if missing, for ``holder`` (the program, as
    the refusal names it): `BadStateDir` if something else is there or it cannot be made."""
    advice = f"give {holder} --state-dir (or HIVE_STATE_DIR) a directory it can make or use"
    try:
        return ensure_private_dir(state_dir)
    except NotADirectoryError:
        # Here, or at one of its parents.
        raise BadStateDir(
            f"the state directory {state_dir} cannot be used: it, or a directory above it, is not "
            f"a directory; {advice}"
        ) from None
    except OSError as exc:
        raise BadStateDir(
            f"the state directory {state_dir} cannot be made: {exc.strerror or exc}; {advice}"
        ) from None


class StateDirLock:
    """A program's hold on its state directory: the lock file, flocked and holding the program's
    pid, until `close` (which leaves no pid behind for anyone to signal)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    def close(self) -> None:
        """Let go of the lock (closing twice does nothing)."""
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def __enter__(self) -> StateDirLock:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def lock_state_dir(state_dir: Path, name: str, *, holder: str, advice: str = ANOTHER) -> StateDirLock:
    """Hold the lock file ``name`` in ``state_dir`` (made as `make_state_dir` makes it) for
    ``holder`` (the program, as the refusal names it): raises `StateDirBusy` if another process
    holds it, telling it to ``advice``, and `StateDirUnusable` if it cannot be opened."""
    path = make_state_dir(state_dir, holder=holder) / name
    try:
        # Not truncated on open: a program that finds the lock held must not wipe its holder's pid.
        fd = try_lock(path)
    except OSError as exc:
        raise StateDirUnusable(
            f"cannot open the lock file {path}: {exc}; move whatever is there away "
            f"(hive keeps its own lock file there), or give this {holder} another --state-dir"
        ) from None
    if fd is None:
        raise StateDirBusy(state_dir, path, holder, advice, _holder_pid(path))
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        log.warning("cannot write this %s's pid into %s: %s", holder, path, exc)
    return StateDirLock(path, fd)


def _holder_pid(path: Path) -> int | None:
    """The pid the holder of the lock at ``path`` wrote into it, if it can be read."""
    try:
        data = read_regular(path)
    except OSError:
        return None
    try:
        return int(data or b"")
    except ValueError:
        return None


def lock_holder(path: Path, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid of the process that holds the lock file at ``path`` (its flock, as ``/proc/locks``
    lists it), without taking it; None if nobody does, or it cannot be told."""
    try:
        found = os.stat(path)
        listed = locks.read_text()
    except OSError:
        return None
    # `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF`: the file by device (hex) and inode.
    wanted = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
            return int(fields[4])
    return None
