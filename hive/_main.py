"""The process boundary of every hive program: how it ends, and with which exit status.

Each program's ``main()`` runs its whole life through :func:`run_main`, which keeps one table
(the README's "Exit status"):

====  ==================================================================================
0     done
1     a failure: an error of hive's (``HiveError``) or an ``OSError`` the user can act on
      (a missing file, a permission, a full disk, ...), reported as one line
2     the program could not run: bad input (a flag, a setting, an argument, a file given to
      it) or state another process owns (``HiveError.exit_code``)
130   stopped by SIGINT, for the programs that end so (each says what it does on a signal)
====  ==================================================================================

Anything else that ends a program is a bug: it is re-raised with its traceback (status 1).
An exception group is looked into whole (every leaf, however nested): each expected leaf is
reported, and one unexpected leaf is enough for the traceback.

Standard library only (and ``hive.errors``): the relay and the operator CLI start in the time
of a bare interpreter, and ``hive run`` spawns its agent before it imports Trio.
"""

from __future__ import annotations

import errno
import signal
import sys
from collections.abc import Callable

from hive.errors import HiveError, leaves

__all__ = ["ACTIONABLE_ERRNOS", "describe", "exit_code_of", "run_main", "take_sigint"]

ACTIONABLE_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENOTEMPTY,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EIO,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EBUSY,
        errno.ETXTBSY,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
        errno.ENXIO,
        errno.ENODEV,
        errno.ENOEXEC,
        errno.EADDRINUSE,
        errno.EADDRNOTAVAIL,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
    }
)
"""The ``OSError`` numbers that name trouble in the world (a path, a permission, a disk, a
peer), which the user can fix; any other (``EBADF``, ``EINVAL``, ...) is hive's own bug."""


def exit_code_of(exc: BaseException) -> int | None:
    """The exit status ``exc`` (not a group) ends a program with; None if it is a bug."""
    if isinstance(exc, HiveError):
        return exc.exit_code
    if isinstance(exc, OSError) and exc.errno in ACTIONABLE_ERRNOS:
        return 1
    return None


def describe(exc: BaseException) -> str:
    """``exc``'s message on one line (an ``OSError`` without its ``[Errno N]`` prefix)."""
    text = ""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
        for name in (exc.filename, exc.filename2):
            if name is not None and str(name) not in text:
                text = f"{name}: {text}"
    text = text or str(exc) or type(exc).__name__
    return " ".join(text.split())


def run_main(prog: str, body: Callable[[], int | None], *, interrupted: int | None = None) -> int:
    """Run ``body``, a program's whole life, and return the status it exits with.

    ``body`` returns its status (None: 0). What it raises is split into its leaves: each one
    expected (:func:`exit_code_of`) is written to stderr as ``<prog>: <message>``; if every
    leaf was, the status is the highest of theirs; if any was not, the whole exception is
    re-raised, traceback and all. ``KeyboardInterrupt`` (SIGINT as Python's default handler
    raises it) ends the program with ``interrupted``, unless an error came with it; with
    ``interrupted`` None it is re-raised as it came, so that the process ends by the signal
    as Python ends it. ``SystemExit`` (argparse's usage errors, exit 2) passes untouched.
    """
    try:
        status = body()
    # Not SystemExit: argparse's usage errors pass untouched, as does any exit the body asks for.
    except (Exception, KeyboardInterrupt, BaseExceptionGroup) as exc:
        found = list(leaves(exc))
        codes: list[int] = []
        unexpected = False
        for leaf in found:
            if isinstance(leaf, KeyboardInterrupt):
                continue
            code = exit_code_of(leaf)
            if code is None:
                unexpected = True
                continue
            print(f"{prog}: {describe(leaf)}", file=sys.stderr, flush=True)
            codes.append(code)
        if unexpected:
            raise
        if codes:
            return max(codes)
        if interrupted is None:
            raise
        return interrupted
    return 0 if status is None else status


def take_sigint() -> None:
    """Make SIGINT raise ``KeyboardInterrupt`` (in Trio: its own handling of it), as Ctrl-C does,
    even in a process started with SIGINT ignored (as a shell starts ``cmd &``), which Python
    leaves ignored. For a command that runs until it is stopped with SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
