"""A child that does not outlive its parent, and telling a process from another with its pid.

``die_with_parent`` is a ``preexec_fn`` for ``subprocess.Popen``: the child asks the kernel for
SIGINT when its parent dies (``PR_SET_PDEATHSIG``), then checks that its parent is still the
process that forked it (a parent that died before the ``prctl`` would never send it). The
kernel sends that signal when the *thread* that forked the child exits, not the process: a
child meant to live as long as its parent is forked on a thread that lives as long (the main
thread, Trio's), never on a worker thread that may exit while the child runs.

``start_time`` (``hive._proc``'s, named here too) is a process's start time from
``/proc/<pid>/stat``: with its pid, it names one process, so that a pid reused by another is not
mistaken for it.

Nothing here imports Trio.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

from hive._proc import start_time

__all__ = ["ParentGone", "die_with_parent", "start_time"]

from hive.runtime._errors import HiveRuntimeError

PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)


class ParentGone(HiveRuntimeError):
    """The process that forked this child died before the child could ask to follow it."""


def die_with_parent(signum: int = signal.SIGINT) -> Callable[[], None]:
    """A ``preexec_fn`` that has the child sent ``signum`` when this thread dies; it refuses to
    exec (``ParentGone``) if the parent is already gone."""
    parent = os.getpid()
    prctl = _libc.prctl

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signum), 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
        if os.getppid() != parent:
            raise ParentGone(f"the parent (pid {parent}) exited before this child could exec")

    return preexec
