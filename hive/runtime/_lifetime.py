"""A child that does not outlive its parent, and telling a process from another with its pid.

``die_with_parent`` is a ``preexec_fn`` for ``subprocess.Popen``: the child asks the kernel for
SIGINT when its parent dies (``PR_SET_PDEATHSIG``), then checks that its parent is still the
process that forked it (a parent that died before the ``prctl`` would never send it). The
kernel sends that signal when the *thread* that forked the child exits, not the process: a
child meant to live as long as its parent is forked on a thread that lives as long (the main
thread, Trio's), never on a worker thread that may exit while the child runs.

A ``preexec_fn`` costs: it keeps ``subprocess`` off its ``vfork`` path, and a full ``fork`` of
an interpreter of hive's size takes ~3 ms where ``vfork`` and an exec take ~0.6. Where
util-linux's ``setpriv`` is on the PATH, ``following_parent`` runs the command through it
(``setpriv --pdeathsig INT -- argv``: the same ``prctl``, then the exec) on the fast path, at
the cost of one small exec (~1.4 ms in all). ``setpriv`` cannot check that the parent is still
there; a parent that dies in the moment between the fork and the ``prctl`` leaves its agent
running, which a restarted harness finds and stops (see ``hive.agent``).

``start_time`` (``hive._proc``'s, named here too) is a process's start time from
``/proc/<pid>/stat``: with its pid, it names one process, so that a pid reused by another is not
mistaken for it.

Nothing here imports Trio.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
from collections.abc import Callable, Mapping, Sequence

from hive.runtime._errors import HiveRuntimeError

__all__ = ["ParentGone", "die_with_parent", "following_parent", "start_time"]

PR_SET_PDEATHSIG = 1


def start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (``hive._proc.start_time``), or None if there is none.
    ``hive._proc`` (with ``dataclasses`` and ``select``) is imported here, when it is first
    asked: not on ``hive run``'s way to its agent's spawn, which imports this module."""
    from hive._proc import start_time as read

    return read(pid)


class ParentGone(HiveRuntimeError):
    """The process that forked this child died before the child could ask to follow it."""


def die_with_parent(signum: int = signal.SIGINT) -> Callable[[], None]:
    """A ``preexec_fn`` that has the child sent ``signum`` when this thread dies; it refuses to
    exec (``ParentGone``) if the parent is already gone."""
    parent = os.getpid()
    import ctypes  # here, not at the top: the fast path (setpriv) needs none of it

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signum), 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
        if os.getppid() != parent:
            raise ParentGone(f"the parent (pid {parent}) exited before this child could exec")

    return preexec


def on_path(program: str, path: str) -> str | None:
    """Where ``program`` is found on ``path`` (a PATH value), as an exec would find it; None where
    it is not. (``shutil.which`` does the same, at a cost in imports that ``hive run`` pays before
    its agent is spawned.)"""
    if os.sep in program:  # a path: looked at as it is, not on PATH
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or os.curdir, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def _setpriv() -> str | None:
    return on_path("setpriv", os.environ.get("PATH", os.defpath))


def following_parent(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    signum: int = signal.SIGINT,
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv and ``preexec_fn`` that start ``argv`` (in ``cwd``) so that it is sent ``signum``
    when this thread dies: through ``setpriv`` where there is one, else with `die_with_parent`.

    A program that cannot be run raises here what ``subprocess.Popen`` would (`FileNotFoundError`,
    `PermissionError`; a bare name is looked up on ``env``'s PATH, as it would be), rather than
    coming back as ``setpriv``'s exit status."""
    setpriv = _setpriv()
    if setpriv is None:
        return list(argv), die_with_parent(signum)
    program = argv[0]
    if os.sep in program:
        path = os.path.join(cwd or os.curdir, program)
        if not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif on_path(program, env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return [setpriv, "--pdeathsig", signal.Signals(signum).name.removeprefix("SIG"), "--", *argv], None
