"""A cgroup v2 per task, where one can be made: every process of the task, wherever it goes.

The daemon makes a task-parent cgroup below its own (``hive-bash-<hash of the state
directory>``: one per state directory, found again by a restarted daemon) and, for each
task, a child of it named by the task's serial. The task's wrapper is created in that child
(``clone3`` with ``CLONE_INTO_CGROUP``, see `hive._spawn`; where that cannot be done, it moves
itself in before it reads the command, writing ``0`` to ``cgroup.procs`` on a descriptor the
daemon opened), so every process of the task starts inside it, and no ``setsid``, double
fork or cleared environment takes a process out: a cgroup is left only by a write to
another cgroup's ``cgroup.procs``. A stop signals the members (``cgroup.procs``), kills them
all at once after the grace (``cgroup.kill``), and ends when the cgroup is empty
(``cgroup.events``: ``populated 0``, awaited through inotify). The empty cgroup is removed.

No controller is enabled anywhere (``cgroup.procs``, ``cgroup.kill`` and ``cgroup.events``
need none), so the daemon may stay in its own cgroup while the task cgroups sit below it.

Where no cgroup v2 hierarchy is mounted, or the daemon cannot make its task-parent cgroup
there, `open_task_parent` says so and the tasks are held by the subreaper and the
environment tag instead (see `hive.bash.procs._procs`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import signal
from pathlib import Path

from hive._inotify import IN_MODIFY, Inotify
from hive._proc import start_time, wait_exit

log = logging.getLogger(__name__)


def cgroup2_mount(mountinfo: str) -> tuple[Path, str] | None:
    """The mount point of the cgroup2 file system and the cgroup path mounted there (its root
    within the hierarchy), from the text of ``/proc/self/mountinfo``; None if none is mounted."""
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields = before.split()
        if sep and after.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(_unescape(fields[4])), _unescape(fields[3])
    return None


def _unescape(field: str) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) undone."""
    return field.encode().decode("unicode_escape").encode("latin-1").decode(errors="surrogateescape")


def own_v2_path(proc_cgroup: str) -> str | None:
    """This process's cgroup in the v2 hierarchy: the ``0::`` line of ``/proc/self/cgroup``."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def own_cgroup_dir() -> Path | None:
    """The directory of this process's own v2 cgroup, or None where there is none to be found."""
    return cgroup_dir("self")


def cgroup_dir(pid: int | str) -> Path | None:
    """The directory of process ``pid``'s v2 cgroup, as this process sees the hierarchy; None
    where there is none to be found (or the process is gone). Blocking."""
    try:
        with open("/proc/self/mountinfo") as f:
            mount = cgroup2_mount(f.read())
        with open(f"/proc/{pid}/cgroup") as f:
            own = own_v2_path(f.read())
    except OSError:
        return None
    if mount is None or own is None:
        return None
    point, root = mount
    own = own.removesuffix(" (deleted)")
    if root != "/":
        if own != root and not own.startswith(root + "/"):
            return None  # our cgroup is not below the part of the hierarchy mounted here
        own = own[len(root) :]
    return point / own.lstrip("/")


def task_parent_name(state_dir: Path) -> str:
    digest = hashlib.sha256(os.fsencode(state_dir.absolute())).hexdigest()[:16]
    return f"hive-bash-{digest}"


def open_task_parent(state_dir: Path) -> Path | None:
    """Make (or find again) this state directory's task-parent cgroup below the daemon's own;
    None, with the reason logged, where that cannot be done (the fallback: the subreaper)."""
    own = own_cgroup_dir()
    if own is None:
        log.info("no cgroup v2 hierarchy holds this daemon: tasks are held by the subreaper and their tag")
        return None
    parent = own / task_parent_name(state_dir)
    try:
        parent.mkdir(mode=0o755, exist_ok=True)
        # Writable for moves: the wrapper's write to a child's cgroup.procs needs it.
        if not os.access(parent, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(parent))
    except OSError as exc:
        log.info(
            "cannot make the task cgroup %s (%s): tasks are held by the subreaper and their tag", parent, exc
        )
        return None
    return parent


def create(cgroup: Path) -> int:
    """Make a task's cgroup; a descriptor of its directory, which the task's wrapper is cloned
    into (see `hive._spawn`) or, where it cannot be, opens ``cgroup.procs`` of (`procs_of`). An
    :class:`OSError` if either fails."""
    cgroup.mkdir(mode=0o755)
    try:
        return os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        with contextlib.suppress(OSError):
            cgroup.rmdir()
        raise


def procs_of(cgroup_fd: int) -> int:
    """A descriptor of the ``cgroup.procs`` of the cgroup whose directory ``cgroup_fd`` is, open
    for writing: a process that writes ``0`` to it moves itself in."""
    return os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=cgroup_fd)


def members(cgroup: Path) -> list[int]:
    """The pids in the cgroup (and none if it is gone)."""
    try:
        with open(cgroup / "cgroup.procs") as f:
            return sorted({int(line) for line in f.read().split()})
    except (OSError, ValueError):
        return []


def populated(cgroup: Path) -> bool:
    """Whether any process is in the cgroup or below it (False if it is gone)."""
    try:
        with open(cgroup / "cgroup.events") as f:
            for line in f:
                key, _sep, value = line.partition(" ")
                if key == "populated":
                    return value.strip() != "0"
    except OSError:
        return False
    return False


def kill(cgroup: Path) -> bool:
    """SIGKILL every process in the cgroup at once (``cgroup.kill``); False if it could not be
    written (gone, or a kernel older than 5.14, which has no ``cgroup.kill``)."""
    try:
        fd = os.open(cgroup / "cgroup.kill", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, b"1")
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def kill_all(cgroup: Path) -> list[int]:
    """SIGKILL every process in the cgroup; the pids that were in it. Through ``cgroup.kill``,
    which also takes a process forked meanwhile; one by one where there is none."""
    pids = members(cgroup)
    if pids and not kill(cgroup):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # in the cgroup: still that process
    return pids


def remove(cgroup: Path) -> bool:
    """Remove the cgroup if it is empty; whether it is gone."""
    try:
        cgroup.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def leftovers(parent: Path) -> list[str]:
    """The names (task serials) of the task cgroups below ``parent``."""
    try:
        return sorted(entry.name for entry in os.scandir(parent) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return []


async def wait_empty(cgroup: Path) -> None:
    """Wait until no process is left in the cgroup: the kernel says so in ``cgroup.events``,
    which inotify reports changed."""
    try:
        inotify = Inotify()
    except OSError as exc:  # out of inotify instances, say: wait for the members one by one
        log.warning("cannot watch cgroup %s (%s): waiting for its processes one by one", cgroup, exc)
        while pids := members(cgroup):
            for pid in pids:
                await wait_exit(pid, start_time(pid))
        return
    try:
        try:
            inotify.watch(cgroup / "cgroup.events", IN_MODIFY)
        except OSError:
            return  # the cgroup is gone: nothing is in it
        while populated(cgroup):
            await inotify.changed()
    finally:
        inotify.close()
