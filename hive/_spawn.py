"""Spawning a process set up before its first instruction, with no ``preexec_fn``: hive._clone3.

`spawn` starts a program through the C extension ``hive._clone3`` (built at install where a
compiler is found, see setup.py): one ``clone3`` that can put the child in a cgroup as it is
created (``CLONE_INTO_CGROUP``) and hands back a pidfd, then, in the child, a new session, a
parent-death signal (refused if the parent is already gone), the child subreaper, an
RLIMIT_FSIZE, the descriptors and the directory, and the exec. A task joins its cgroup so in
well under a millisecond; the write to ``cgroup.procs`` it replaces waits an RCU grace period
(10-18 ms) whenever the previous one is older than that, which is every call an agent makes.
And ``subprocess`` with a ``preexec_fn`` forks the whole interpreter the slow way.

Where the extension was not built, or the kernel has no ``clone3`` or cannot clone into a
cgroup (before 5.7, a seccomp filter), `spawn` returns None and the caller starts the process
the way it did before; the log says so once. `start` is that for a process that needs only a
session and a parent-death signal: `spawn`, else ``subprocess`` with `die_with_parent`.

The parent-death signal is sent when the *thread* that spawned the child exits, not the
process: a child meant to live as long as its parent is spawned on a thread that lives as long
(the main thread, Trio's), never on a worker thread that may exit while the child runs.
Blocking (a clone and an exec). Nothing here imports Trio.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from types import ModuleType
from typing import TypeAlias

import attrs

__all__ = ["Process", "Started", "die_with_parent", "on_path", "popen", "spawn", "start"]


PR_SET_PDEATHSIG = 1


@attrs.define(eq=False)
class Started:
    """A child just started: its pid, a pidfd of it (the caller's to close), and its exit
    reaped as ``subprocess.Popen`` reaps it (`poll`, `wait`), so that either can hold a child."""

    pid: int
    pidfd: int
    returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status (reaping it), or None while it runs."""
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        """Wait for it to exit (blocking) and reap it; its exit status."""
        status = self._reap(0)
        assert status is not None
        return status

    def _reap(self, options: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, options)
            except ChildProcessError:
                self.returncode = 0  # reaped by someone else: as Popen reports it
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


Process: TypeAlias = "subprocess.Popen[bytes] | Started"
"""A child this process started, by `spawn` or by ``subprocess`` where `spawn` cannot."""


@attrs.define(eq=False)
class _Mechanism:
    """The extension, until it is found missing or the kernel refuses it; why not, said once."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    module: ModuleType | None = None
    loaded: bool = False
    said: bool = False

    def get(self) -> ModuleType | None:
        with self.lock:
            if not self.loaded:
                self.loaded = True
                try:
                    self.module = importlib.import_module("hive._clone3")
                except ImportError as exc:
                    self._give_up(f"hive._clone3 is not built ({exc}; a C compiler at install builds it)")
            return self.module

    def refused(self, exc: OSError) -> None:
        with self.lock:
            self._give_up(f"the kernel refuses clone3 into a cgroup ({exc.strerror or exc})")

    def _give_up(self, why: str) -> None:
        self.module = None
        if not self.said:
            self.said = True
            import logging  # here only: `hive run` spawns its agent before logging loads

            logging.getLogger(__name__).warning(
                "%s: processes are started through subprocess, and tasks join their cgroup by a write "
                "to cgroup.procs, which is slower (10-18 ms a task)",
                why,
            )


_mechanism = _Mechanism()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | Mapping[bytes, bytes],
    cwd: str | os.PathLike[str] | None = None,
    stdio: tuple[int, int, int] = (-1, -1, -1),
    pass_fds: Collection[int] = (),
    cgroup: int | None = None,
    new_session: bool = False,
    death_signal: int | None = None,
    subreaper: bool = False,
    fsize_limit: int | None = None,
) -> Started | None:
    """Start ``argv`` (a bare name looked up on ``env``'s PATH) with ``env``, in ``cwd``; None,
    having started nothing, where this mechanism is not available (see the module's docstring).

    ``stdio``: the descriptors the child gets as 0, 1 and 2 (-1: this process's own); ``pass_fds`` stay open in the child at their numbers, and every other
    descriptor closes at the exec. ``cgroup``: a descriptor of the cgroup v2 directory the child
    is created in. ``new_session``: it leads a session (and a process group) of its own.
    ``death_signal``: it is sent this signal when the calling *thread* exits; if this process
    has already exited by then, the child execs nothing (an `OSError` with ``ESRCH``).
    ``subreaper``: it is the child subreaper of its descendants. ``fsize_limit``: its
    RLIMIT_FSIZE (soft and hard), in bytes. A failure raises the `OSError` that ``subprocess``
    would: ``filename`` is ``cwd`` or the program where one was the cause.
    """
    module = _mechanism.get()
    if module is None:
        return None
    program = _program(argv[0], env)
    environ = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]
    try:
        pid, pidfd = module.spawn(
            path=os.fsencode(program),
            argv=[os.fsencode(a) for a in argv],
            env=environ,
            cwd=None if cwd is None else os.fsencode(cwd),
            stdio=stdio,
            keep_fds=tuple(pass_fds),
            cgroup_fd=-1 if cgroup is None else cgroup,
            new_session=new_session,
            death_signal=0 if death_signal is None else int(death_signal),
            subreaper=subreaper,
            fsize=-1 if fsize_limit is None else fsize_limit,
        )
    except module._Unsupported as exc:
        _mechanism.refused(exc)
        return None
    except OSError as exc:
        if isinstance(exc.filename, bytes):
            exc.filename = os.fsdecode(exc.filename)
        if exc.filename == os.fsdecode(program):
            exc.filename = argv[0]
        raise
    return Started(pid, pidfd)


def _program(name: str, env: Mapping[str, str] | Mapping[bytes, bytes]) -> str:
    """The file to exec for ``name``: itself if it has a ``/`` (relative to the child's
    directory, as exec takes it), else the first executable of that name on ``env``'s PATH."""
    if os.sep in name:
        return name
    path = next((value for key, value in env.items() if os.fsencode(key) == b"PATH"), os.defpath)
    found = on_path(name, os.fsdecode(path))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return found


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


def start(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    stdio: tuple[int, int, int] = (-1, -1, -1),
    death_signal: int | None = None,
) -> Process:
    """Start ``argv`` leading a session of its own, sent ``death_signal`` (if any) when the
    calling thread exits: through `spawn`, or where it cannot, ``subprocess`` with
    `die_with_parent` as its ``preexec_fn`` (a full fork of this process). The descriptors are as
    `spawn` takes them (-1: this process's own). Raises what ``subprocess.Popen`` raises."""
    started = spawn(argv, env=env, cwd=cwd, stdio=stdio, new_session=True, death_signal=death_signal)
    if started is not None:
        return started
    preexec_fn = None if death_signal is None else die_with_parent(death_signal)
    return popen(argv, env=env, cwd=cwd, stdio=stdio, preexec_fn=preexec_fn)


def popen(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | Mapping[bytes, bytes],
    cwd: str | os.PathLike[str] | None,
    stdio: tuple[int, int, int],
    pass_fds: Collection[int] = (),
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """The fallback where `spawn` cannot be used: ``subprocess`` starts ``argv`` leading a session
    of its own, ``preexec_fn`` (if any) run in the forked child. The descriptors as `spawn` takes
    them."""
    stdin, stdout, stderr = (None if fd < 0 else fd for fd in stdio)
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - prctl, getppid, setrlimit only
    )


def die_with_parent(signum: int = signal.SIGINT) -> Callable[[], None]:
    """A ``preexec_fn`` (where `spawn` cannot be used) that has the child sent ``signum`` when
    this thread dies; it refuses to exec if the parent is already gone."""
    import ctypes  # here, not at the top: only the fallback needs it

    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signum), 0, 0, 0) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"prctl(PR_SET_PDEATHSIG): {os.strerror(number)}")
        if os.getppid() != parent:
            raise OSError(errno.ESRCH, f"the parent (pid {parent}) exited before this child could exec")

    return preexec
