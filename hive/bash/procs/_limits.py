"""The daemon's open-files limit: raised as far as it goes at start, and kept clear of by `run`.

Each running task holds one descriptor in the daemon (its pidfd), each client connection one
(its socket), and starting a task briefly
needs a dozen more (its four files, the record's and loose end's temporary files, the fork's
error pipe, ``/proc`` reads). A `run` that would take the daemon within :data:`MARGIN` of its
limit is refused with a message that says so, before anything is written: past the limit
every save fails (``EMFILE``), so a task could start with no record and no loose end. The
refusal says what holds the files (tasks, connections, the rest), read off ``/proc/self/fd``.
"""

from __future__ import annotations

import errno
import logging
import os
import resource

import attrs

from hive.bash._errors import TaskLimit

log = logging.getLogger(__name__)

NEEDED_TO_START = 16
"""Descriptors a task's start may hold at once, with room to spare."""
MARGIN = 32
"""Descriptors kept free for everything else: client connections, the agent socket, saves."""
FD_ERRNOS = (errno.EMFILE, errno.ENFILE)


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the open-files limit from %d to %d: %s", soft, hard, exc)
            return soft
    return hard


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


@attrs.frozen
class Holders:
    """What the daemon's open files are: tasks' pidfds, sockets (client connections, the
    listener, the agent socket), and the rest (files being written, pipes, the event loop's)."""

    tasks: int = 0
    sockets: int = 0
    other: int = 0

    def __str__(self) -> str:
        return f"{self.tasks} held by running tasks, {self.sockets} by sockets (client connections), {self.other} other"


def holders() -> Holders:
    """Who holds the daemon's open files, by what each descriptor is (``/proc/self/fd``)."""
    tasks = sockets = other = 0
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return Holders()
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor, or one closed since
        if target.startswith("socket:"):
            sockets += 1
        elif target == "anon_inode:[pidfd]":
            tasks += 1
        else:
            other += 1
    return Holders(tasks, sockets, other)


def check_room_for_a_task() -> None:
    """Raise :class:`TaskLimit` if starting a task would take the daemon near its open-files limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    in_use = open_descriptors()
    if in_use + NEEDED_TO_START > soft - MARGIN:
        held = holders()
        if held.tasks >= held.sockets:
            what = "its task limit"
            advice = "Wait for tasks to end (`list` shows them; `stop` ends one) and run it again"
        else:
            what = "its open-files limit, mostly by client connections"
            advice = (
                "Close MCP clients that are idle (each hive-bash-mcp holds a connection) and run it again"
            )
        raise TaskLimit(
            f"cannot start the task: the daemon is at {what} ({in_use} open files of a limit of {soft}: "
            f"{held}); nothing ran. {advice}, or raise the daemon's open-files limit "
            "(LimitNOFILE= in its systemd unit, or ulimit -n)"
        )


def out_of_descriptors(exc: OSError) -> str | None:
    """What to say about an ``EMFILE``/``ENFILE``; None for any other error."""
    if exc.errno == errno.EMFILE:
        return (
            "the daemon has run out of open files (EMFILE): it is at its task limit; wait for tasks "
            "to end, or raise its open-files limit (LimitNOFILE=)"
        )
    if exc.errno == errno.ENFILE:
        return (
            "the system has run out of open files (ENFILE): wait for tasks to end, or raise the "
            "system's limit (fs.file-max)"
        )
    return None
