"""A cgroup namespace per task: a mark that every process of the task keeps, whatever it does.

The task's wrapper, once it is in its cgroup (if it has one), re-executes itself under
``unshare --cgroup`` before the command runs (see `hive.bash.procs._procs.WRAPPER`), so the task's
processes share a cgroup namespace that no other process has. It is inherited through every
fork and exec, kept by ``setsid``, a cleared environment and a move to another cgroup, and can
be left only by ``setns`` (``nsenter``), which takes CAP_SYS_ADMIN: a stop finds by it the
processes that left the task's group, environment tag and cgroup. The daemon holds the
namespace open from the moment it sees the wrapper in it until no process of the task is left,
so that its inode number, which the kernel gives again once a namespace is gone, cannot name
another task's meanwhile. A restarted daemon learns the namespaces of the tasks whose wrappers
still run; the leftovers of a task that ended before are found by their tag and cgroup alone.
Where the cgroup v2
hierarchy is mounted with ``nsdelegate`` (systemd mounts it so), the namespace is also a
delegation boundary: a task cannot move a process out of its cgroup at all.

A namespace is made only where ``unshare --cgroup`` works for the daemon (CAP_SYS_ADMIN: a
daemon run as root); elsewhere the tag, the group and the cgroup hold the task, and a stop
says what it could not attribute (see `hive.bash.procs._stopping`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

log = logging.getLogger(__name__)


def cgroup_namespace(pid: int | str) -> int | None:
    """The inode of the cgroup namespace of process ``pid``; None if it cannot be read (gone, or
    not this daemon's to look at)."""
    try:
        return os.stat(f"/proc/{pid}/ns/cgroup").st_ino
    except OSError:
        return None


def hold_cgroup_namespace(pid: int) -> tuple[int, int] | None:
    """The inode of the cgroup namespace of process ``pid`` and a descriptor of it, which keeps
    the namespace, and so its inode number, from being reused while it is open (blocking);
    None if it cannot be opened."""
    try:
        fd = os.open(f"/proc/{pid}/ns/cgroup", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    return os.fstat(fd).st_ino, fd


def task_unshare(bash: str) -> str | None:
    """The ``unshare`` that gives each task a cgroup namespace of its own, tried once here
    (blocking); None, with the reason logged, where there is none or it is refused."""
    unshare = shutil.which("unshare")
    if unshare is None:
        log.info("no unshare on PATH: tasks get no cgroup namespace of their own")
        return None
    try:
        tried = subprocess.run(
            [unshare, "--cgroup", "--", bash, "-c", ":"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("cannot run %s (%s): tasks get no cgroup namespace of their own", unshare, exc)
        return None
    if tried.returncode != 0:
        why = tried.stderr.decode(errors="replace").strip() or f"exit status {tried.returncode}"
        log.info("%s --cgroup is refused (%s): tasks get no cgroup namespace of their own", unshare, why)
        return None
    return unshare
