"""Process-level helpers for bash tasks: the wrapper, a task's processes, pid identity, exit waits.

Where the daemon can make cgroups, each task runs in a cgroup v2 of its own, which holds
every descendant whatever it does (see `hive.bash.procs._cgroups`): the wrapper is created in it
(`hive._spawn`), or, where that cannot be done, moves itself in before it reads the command. Everywhere else (no writable v2 hierarchy, or ``--no-cgroups``)
this module's fallback holds the task: its processes are all of its descendants, not only
its process group. A process that `setsid`s, moves to a new group or double-forks leaves the
group but keeps the task's tag (``HIVE_BASH_TASK=<id>:<serial>`` in its environment,
inherited by every descendant and readable in ``/proc/<pid>/environ`` by the same uid, even
after a daemon restart), and so do its descendants, found by their parent. The daemon is
also the child subreaper (`become_subreaper`), so such a process, once orphaned, is
re-parented to the daemon rather than to init, and the daemon reaps it (`reap_orphans`).
Where tasks get no cgroup namespace (see `hive.bash.procs._namespaces`), each task's wrapper is the
child subreaper of the task (`spawn_task`'s ``subreaper``): an orphan that also cleared its
environment (``setsid env -i ...`` whose parent has exited) is the wrapper's child while the task
runs, found by its parentage. Once the wrapper is gone (the task ended by itself), such an orphan
is a child of the daemon with no tag, and no task can be told as its own; a stop notes such
orphans (`unmarked_orphans`). The tag is set in both cases. Everything here that reads ``/proc`` is blocking:
run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

import attrs
import trio

from hive import _spawn
from hive._files import read_regular
from hive._proc import (
    ProcStat,
    is_same_process,
    listed_pids,
    read_stat,
    signal_group,
    start_time,
    wait_exit,
)
from hive.bash._errors import BashError
from hive.bash.procs import _cgroups
from hive.bash.procs._namespaces import cgroup_namespace

# The wrapper is bash, and the command runs as `bash -c CMD` would run it. It runs in the
# *foreground* of a shell that traps SIGINT with a handler: an `&` child of a non-interactive
# shell would start with SIGINT ignored, and an ignored signal (trap '') would be inherited.
# The command runs in a subshell, where the trap is reset to the default, so a SIGINTed
# `sleep` records 130 and a task that ignores SIGINT and exits 5 later records 5. In that
# subshell `eval` gives it `bash -c` semantics ($0 is `bash`, no positional parameters,
# `exit` ends only the command, line numbers count from the command's first line) without
# the exec of a second shell.
#
# The command is never in argv: Linux refuses a single argument over 128 KiB (E2BIG). It
# comes on the wrapper's stdin, an open file description of `<id>.cmd` that the daemon has
# just written, and is read by a builtin (no fork, no path to follow); then stdin becomes
# /dev/null, as it was when the command was an argument. The exit status goes to an fd the
# daemon opened on `<id>.exit` (created, never followed through a symlink), whose number is
# $2; the command's subshell closes it first, so the task cannot write it. The status is
# written only after the command has ended and read only after the wrapper has exited, so
# one small write is enough. $1 (the exit file's path) and $3 (a mark) are unused by the
# script: they are how a restarted daemon finds the wrapper and its task (`find_wrappers`).
# The variables the wrapper sets are unset before the command runs.
#
# Before anything else, where the wrapper was started without `hive._spawn` (which creates it
# in its cgroup with its limit set), two things that every process of the task inherits: where
# the daemon made the task a cgroup, the wrapper moves itself into it (``0`` written to the descriptor
# of its ``cgroup.procs`` whose number is in ``__hive_cgroup_fd``), and it sets RLIMIT_FSIZE
# (``ulimit -f``, KiB, in ``__hive_fsize``), so that no process of the task, escaped or not,
# can grow a file (its output among them) far past the output cap, however fast it writes.
# A wrapper that cannot enter its cgroup runs nothing and exits 125. Then, where the daemon
# gives tasks a cgroup namespace (``unshare`` in ``__hive_unshare``, see `hive.bash.procs._namespaces`),
# the wrapper re-executes itself under ``unshare --cgroup``, same pid, same argv, the variables
# that did the steps above unset, so that the second pass goes straight on to the command. The `.exit` file is
# created with placeholder bytes (`hive.bash.files._store.EXIT_PLACEHOLDER`), so the status written over them needs
# no new room on the disk; the wrapper exits with the command's status as well, which the
# daemon takes when the file could not be written anyway.
WRAPPER = (
    'if [ -n "${__hive_cgroup_fd-}" ]; then { printf 0 >&"$__hive_cgroup_fd"; } 2>/dev/null || '
    '{ echo "hive-bash-daemon: cannot move the task into its cgroup; nothing ran" >&2; '
    "printf '125\\n' >&\"$2\"; exit 125; }; exec {__hive_cgroup_fd}>&-; fi; "
    '[ -z "${__hive_fsize-}" ] || ulimit -f "$__hive_fsize" 2>/dev/null; '
    "unset -v __hive_cgroup_fd __hive_fsize; "
    'if [ -n "${__hive_unshare-}" ]; then __hive_u=$__hive_unshare; unset -v __hive_unshare; '
    'exec "$__hive_u" --cgroup -- "$BASH" -c "$BASH_EXECUTION_STRING" "$0" "$@"; fi; '
    "trap : INT; IFS= read -r -d '' __hive_cmd; exec </dev/null; __hive_fd=$2; "
    '(exec {__hive_fd}>&-; eval "set --; unset -v __hive_cmd __hive_fd; $__hive_cmd"); '
    'rc=$?; printf \'%s\\n\' "$rc" >&"$__hive_fd"; exit "$rc"'
)

WRAPPER_ARGV0 = "bash"
TASK_TAG = "HIVE_BASH_TASK"
"""The environment variable that marks every process of a task: ``<id>:<serial>``."""

log = logging.getLogger(__name__)

_PR_SET_CHILD_SUBREAPER = 36


@attrs.define(eq=False)
class _Wrappers:
    """The wrappers this daemon started and has not reaped yet: `reap_orphans` leaves them to
    `Child.wait`. A wrapper may exit before its spawn returns its pid, so `reap_orphans`
    reaps nothing while a spawn is under way; spawns do not wait for one another."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    pids: set[int] = attrs.field(factory=set)
    starting: int = 0
    left: list[subprocess.Popen[bytes]] = attrs.field(factory=list)
    """Wrappers whose wait was given up (the daemon stopping while they run on): kept, since
    their task outlives the daemon and a restarted one adopts it, not reaped and not warned of
    as a leak when the object would be collected."""


_wrappers = _Wrappers()


def wrapper_mark(serial: str) -> str:
    return f"hive-bash-task:{serial}"


def task_tag(task_id: str, serial: str) -> str:
    """The value of ``HIVE_BASH_TASK`` in the environment of every process of this task."""
    return f"{task_id}:{serial}"


def become_subreaper() -> bool:
    """Make this process the child subreaper: orphaned descendants are re-parented to it.

    They must then be reaped here (`reap_orphans`). False, with a warning, where prctl fails.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        log.warning("cannot become the child subreaper: %s", os.strerror(err))
        return False
    return True


@functools.cache
def _wrapper_subreaper() -> Callable[[], None]:
    """A ``preexec_fn`` that makes the task's wrapper the child subreaper of the task: a
    process of the task orphaned while the wrapper runs (a double fork) stays the wrapper's
    child, a descendant of the task, whatever marks it has cleared. Kept across the exec."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")

    return preexec


class SpawnError(BashError, OSError):
    """The task's wrapper could not be started (bash missing, a bad working directory, no processes left)."""


@functools.cache
def bash_path() -> str:
    """The bash that runs tasks: the first on the daemon's PATH (NixOS has no /bin/bash), else /bin/bash."""
    return shutil.which("bash") or "/bin/bash"


@attrs.define(eq=False)
class Child:
    """A task's wrapper, started by this daemon: waited for through a pidfd, then reaped."""

    pid: int
    pidfd: int
    popen: subprocess.Popen[bytes] | None = None
    """Where it was started through ``subprocess`` (`hive._spawn` unavailable): told its end, so
    that it does not wait for it again nor warn of it as left unwaited."""

    async def wait(self) -> int:
        """Wait for the wrapper to exit and reap it; its return code (negative: killed by a signal)."""
        try:
            info = None
            while info is None:
                await trio.lowlevel.wait_readable(self.pidfd)
                # Readable once it is a zombie, so this reaps it without waiting; through its
                # pidfd, so never a process that reused its pid.
                info = os.waitid(os.P_PIDFD, self.pidfd, os.WEXITED | os.WNOHANG)  # noqa: ASYNC222
        except ChildProcessError:
            returncode = 0  # reaped by someone else: as Popen.wait reports it
        except BaseException:
            if self.popen is not None:
                with _wrappers.lock:
                    _wrappers.left.append(self.popen)
            raise
        else:
            returncode = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        finally:
            os.close(self.pidfd)
        if self.popen is not None:
            self.popen.returncode = returncode
        with _wrappers.lock:
            _wrappers.pids.discard(self.pid)
        return returncode


def spawn_task(
    *,
    cmd_fd: int,
    exit_fd: int,
    exit_file: Path,
    mark: str,
    tag: str,
    cwd: Path,
    stdout: int,
    stderr: int,
    cgroup_fd: int | None = None,
    fsize_limit: int | None = None,
    unshare: str | None = None,
    subreaper: bool = False,
) -> Child:
    """Start the command that ``cmd_fd`` holds under the wrapper, leading a new session.

    ``cmd_fd`` is read from its current offset to its end; ``exit_fd`` receives the exit
    status; the output goes to ``stdout`` and ``stderr``. Blocking (a clone and an exec): call
    it from a worker thread, as trio's own open_process does. A failure is a :class:`SpawnError`.
    ``tag`` goes into the environment as ``HIVE_BASH_TASK`` (see `task_tag`). ``cgroup_fd``:
    the directory of the task's cgroup, which the wrapper is created in (or enters before
    anything runs, where `hive._spawn` is not available); ``fsize_limit``: the RLIMIT_FSIZE of
    every process of the task, in bytes; ``unshare``: the ``unshare`` that gives the task a
    cgroup namespace of its own; ``subreaper``: the wrapper is the child subreaper of the task's
    processes, for where the task has no such namespace.
    """
    bash = bash_path()
    argv = [bash, "-c", WRAPPER, WRAPPER_ARGV0, str(exit_file), str(exit_fd), mark]
    env = {**os.environb, TASK_TAG.encode(): os.fsencode(tag)}
    if unshare is not None:
        env[b"__hive_unshare"] = os.fsencode(unshare)
    with _wrappers.lock:
        _wrappers.starting += 1
    child = None
    try:
        started = _spawn.spawn(
            argv,
            env=env,
            cwd=cwd,
            stdio=(cmd_fd, stdout, stderr),
            pass_fds=[exit_fd],
            cgroup=cgroup_fd,
            new_session=True,
            subreaper=subreaper,
            fsize_limit=fsize_limit,
        )
        if started is not None:
            child = Child(started.pid, started.pidfd)
        else:
            child = _spawn_through_subprocess(
                argv,
                env,
                cwd,
                (cmd_fd, stdout, stderr),
                exit_fd,
                cgroup_fd=cgroup_fd,
                fsize_limit=fsize_limit,
                subreaper=subreaper,
            )
    except OSError as exc:
        if exc.filename is not None and os.fsdecode(exc.filename) == os.fsdecode(cwd):
            what = f"its working directory {cwd}"
        elif exc.filename is not None:
            what = os.fsdecode(exc.filename)
        else:
            what = f"bash ({bash})"
        raise SpawnError(
            exc.errno, f"cannot start the task: {what}: {exc.strerror or exc}; nothing ran"
        ) from None
    finally:
        with _wrappers.lock:
            _wrappers.starting -= 1
            if child is not None:
                _wrappers.pids.add(child.pid)
    return child


def _spawn_through_subprocess(
    argv: list[str],
    env: dict[bytes, bytes],
    cwd: Path,
    stdio: tuple[int, int, int],
    exit_fd: int,
    *,
    cgroup_fd: int | None,
    fsize_limit: int | None,
    subreaper: bool,
) -> Child:
    """`spawn_task` where `hive._spawn` is not available: the wrapper enters its cgroup and sets
    its RLIMIT_FSIZE itself, and a ``preexec_fn`` makes it the subreaper (the old way, kept only
    for where the extension was not built or the kernel refuses it)."""
    fds = [exit_fd]
    procs = None
    try:
        if cgroup_fd is not None:
            procs = _cgroups.procs_of(cgroup_fd)
            env[b"__hive_cgroup_fd"] = str(procs).encode()
            fds.append(procs)
        if fsize_limit is not None:
            env[b"__hive_fsize"] = str(-(-fsize_limit // 1024)).encode()
        preexec_fn = _wrapper_subreaper() if subreaper else None
        popen = _spawn.popen(argv, env=env, cwd=cwd, stdio=stdio, pass_fds=fds, preexec_fn=preexec_fn)
    finally:
        if procs is not None:
            os.close(procs)
    # The child cannot be reaped before we reap it, so its pid is still its own here.
    return Child(popen.pid, os.pidfd_open(popen.pid), popen)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for pid in listed_pids():
        stat = read_stat(pid)
        if stat is not None and not stat.zombie and stat.pgid == pgid:
            members.append(int(pid))
    return members


@attrs.frozen
class ProcInfo:
    """One process as ``/proc`` showed it."""

    pid: int
    ppid: int
    pgid: int
    zombie: bool
    start_time: int
    tag: str | None
    """Its ``HIVE_BASH_TASK``, if it is the daemon's uid's and has one."""
    cgroup_ns: int | None = None
    """The inode of its cgroup namespace, where it was read (see `hive.bash.procs._namespaces`)."""

    @classmethod
    def of(cls, pid: int, stat: ProcStat, tag: str | None, cgroup_ns: int | None = None) -> ProcInfo:
        """Process ``pid`` as ``stat``, read from its ``/proc/<pid>/stat``, shows it."""
        return cls(
            pid=pid,
            ppid=stat.ppid,
            pgid=stat.pgid,
            zombie=stat.zombie,
            start_time=stat.start_time,
            tag=tag,
            cgroup_ns=cgroup_ns,
        )


@attrs.frozen
class TaskMarks:
    """What tells a task's processes from the others': its ``HIVE_BASH_TASK`` tag, its
    wrapper's process group (None once the wrapper is gone: its pid may be anyone's), and its
    cgroup namespace (None where it has none, or it is not known yet)."""

    tag: str
    pgid: int | None = None
    cgroup_ns: int | None = None
    known: frozenset[tuple[int, int]] = frozenset()
    """Processes (pid, start time) found to be the task's while its wrapper ran: the orphans it
    held as their subreaper, which its end hands over to the daemon with no mark of the task."""


def snapshot(*, read_tags: bool = True) -> list[ProcInfo]:
    """Every process on the machine, with the task tag of those of this uid and the cgroup
    namespace of those it may look at (blocking)."""
    uid = os.getuid()
    prefix = f"{TASK_TAG}=".encode()
    found = []
    for pid in listed_pids():
        stat = read_stat(pid)
        if stat is None:
            continue
        marked = read_tags and not stat.zombie
        tag = _tag_of(pid, uid, prefix) if marked else None
        found.append(ProcInfo.of(int(pid), stat, tag, cgroup_namespace(pid) if marked else None))
    return found


def proc_infos(pids: Iterable[int]) -> list[ProcInfo]:
    """These processes as ``/proc`` shows them now, the live ones only, without their tags."""
    found = []
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None and not stat.zombie:
            found.append(ProcInfo.of(pid, stat, None))
    return found


def _tag_of(pid: str, uid: int, prefix: bytes) -> str | None:
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return None
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def members(procs: Iterable[ProcInfo], marks: TaskMarks) -> list[ProcInfo]:
    """The live processes of one task: those carrying its tag, those in its process group
    (its wrapper's pid), those in its cgroup namespace, those known to be its, and every
    descendant of any of them (a process that cleared its environment but is still below one
    that did not)."""
    return _ProcIndex(procs).members(marks)


class _ProcIndex:
    """The live processes of one scan, indexed by tag, group and parent: each task's members
    are then found in time proportional to their number, not to the scan's."""

    def __init__(self, procs: Iterable[ProcInfo]) -> None:
        me = os.getpid()
        self.by_tag: dict[str, list[ProcInfo]] = {}
        self.by_pgid: dict[int, list[ProcInfo]] = {}
        self.by_ns: dict[int, list[ProcInfo]] = {}
        self.by_pid: dict[int, ProcInfo] = {}
        self.children: dict[int, list[ProcInfo]] = {}
        own_ns = cgroup_namespace(me)
        for p in procs:
            if p.zombie or p.pid == me:
                continue
            if p.tag is not None:
                self.by_tag.setdefault(p.tag, []).append(p)
            if p.cgroup_ns is not None and p.cgroup_ns != own_ns:
                self.by_ns.setdefault(p.cgroup_ns, []).append(p)
            self.by_pid[p.pid] = p
            self.by_pgid.setdefault(p.pgid, []).append(p)
            self.children.setdefault(p.ppid, []).append(p)

    def members(self, marks: TaskMarks) -> list[ProcInfo]:
        chosen = {p.pid: p for p in self.by_tag.get(marks.tag, ())}
        if marks.pgid is not None:
            chosen.update((p.pid, p) for p in self.by_pgid.get(marks.pgid, ()))
        if marks.cgroup_ns is not None:
            chosen.update((p.pid, p) for p in self.by_ns.get(marks.cgroup_ns, ()))
        for pid, start in marks.known:
            known = self.by_pid.get(pid)
            if known is not None and known.start_time == start:
                chosen[pid] = known
        stack = list(chosen)
        while stack:
            for child in self.children.get(stack.pop(), ()):
                if child.pid not in chosen:
                    chosen[child.pid] = child
                    stack.append(child.pid)
        return sorted(chosen.values(), key=lambda p: p.pid)


def task_processes(marks: TaskMarks) -> list[ProcInfo]:
    """The live processes of one task (blocking: a scan of /proc)."""
    return members(snapshot(), marks)


def signal_processes(procs: Iterable[ProcInfo], sig: signal.Signals) -> list[int]:
    """Send ``sig`` to each process that is still the one the scan saw; the pids signalled.

    Through a pidfd, so a pid reused since the scan is never signalled.
    """
    signalled = []
    for proc in procs:
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:
            continue
        try:
            if is_same_process(proc.pid, proc.start_time):
                signal.pidfd_send_signal(fd, sig)
                signalled.append(proc.pid)
        except OSError:
            pass
        finally:
            os.close(fd)
    return signalled


def signal_escaped(marks: TaskMarks, sig: signal.Signals) -> list[int]:
    """Send ``sig`` to the task's processes outside its group (the group had it by `signal_group`)."""
    return signal_processes((p for p in task_processes(marks) if p.pgid != marks.pgid), sig)


def kill_task(marks: TaskMarks, *, settle: float = 1.0, rounds: int = 5) -> tuple[bool, list[int]]:
    """SIGKILL every process of the task, and again any that a dying one forked meanwhile.

    Whether the group ``pgid`` took it, and the pids killed one by one (blocking: scans of
    /proc, and up to ``settle`` seconds per round while the killed ones die). Without a
    ``pgid`` (a task whose wrapper is long gone, its pid free for reuse) the tag and the
    namespace count.
    """
    pgid = marks.pgid
    group = False
    killed: set[int] = set()
    for _ in range(rounds):
        group = (pgid is not None and signal_group(pgid, signal.SIGKILL)) or group
        procs = task_processes(marks)
        if not procs:
            break
        killed.update(signal_processes(procs, signal.SIGKILL))
        _wait_gone(procs, settle)
    return group, sorted(killed)


def _wait_gone(procs: Collection[ProcInfo], seconds: float) -> None:
    fds = []
    try:
        for proc in procs:
            with contextlib.suppress(OSError):
                fds.append(os.pidfd_open(proc.pid))
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        pending = len(fds)
        deadline = time.monotonic() + seconds
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for fd, _event in poller.poll(left * 1000):
                poller.unregister(fd)
                pending -= 1
    finally:
        for fd in fds:
            os.close(fd)


async def wait_gone(procs: Iterable[ProcInfo]) -> None:
    """Wait until every one of these processes has exited (a zombie counts as exited)."""
    for proc in procs:
        await wait_exit(proc.pid, proc.start_time)


def reap_orphans(procs: Iterable[ProcInfo]) -> list[int]:
    """Reap the zombies re-parented to this daemon (the subreaper); the pids reaped.

    Only those: a wrapper this daemon started is reaped by `Child.wait`, which needs its exit
    status, so none is reaped while a spawn is under way (its wrapper may already be a zombie
    whose pid `spawn_task` has not registered yet); they wait for the next interval. The
    daemon starts no other children.
    """
    me = os.getpid()
    reaped: list[int] = []
    with _wrappers.lock:
        if _wrappers.starting:
            return reaped
        for proc in procs:
            if proc.zombie and proc.ppid == me and proc.pid not in _wrappers.pids:
                with contextlib.suppress(ChildProcessError):
                    pid, _status = os.waitpid(proc.pid, os.WNOHANG)
                    if pid == proc.pid:
                        reaped.append(pid)
    return reaped


def unmarked_orphans(since: int | None) -> list[ProcInfo]:
    """The live processes orphaned to this daemon (the subreaper) that carry no task's tag,
    started at ``since`` (clock ticks, as ``/proc/<pid>/stat`` says) or later, by pid
    (blocking). Its wrappers are not among them: they are its children, not orphans."""
    me = os.getpid()
    with _wrappers.lock:
        wrappers = set(_wrappers.pids)
    return sorted(
        (
            p
            for p in snapshot()
            if p.ppid == me
            and not p.zombie
            and p.tag is None
            and p.pid not in wrappers
            and (since is None or p.start_time >= since)
        ),
        key=lambda p: p.pid,
    )


def scan_tasks(tasks: Mapping[str, TaskMarks], *, reap: bool) -> dict[str, list[ProcInfo]]:
    """One scan of /proc for several tasks (key -> its marks): each one's live processes.

    With ``reap``, orphans re-parented to the daemon are reaped in the same pass. With no
    tasks and no zombie child to reap, /proc is not read at all.
    """
    reap = reap and _has_zombie_child()
    if not tasks and not reap:
        return {}
    procs = snapshot(read_tags=bool(tasks))
    if reap:
        reap_orphans(procs)
    index = _ProcIndex(procs)
    return {key: index.members(marks) for key, marks in tasks.items()}


def _has_zombie_child() -> bool:
    """Whether any child of this process has exited and not been reaped (it is left unreaped)."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False


def _is_wrapper(argv: list[bytes]) -> bool:
    """Whether this argv is a task wrapper's: `<bash> -c WRAPPER bash <exit file> <fd> <mark>`."""
    return (
        len(argv) == 7
        and os.path.basename(argv[0]) == b"bash"
        and argv[1:4] == [b"-c", WRAPPER.encode(), WRAPPER_ARGV0.encode()]
    )


def _argv(pid: str) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[:-1]
    except OSError:
        return None


def find_wrapper(mark_text: str) -> tuple[int, int] | None:
    """The pid and start time of the live wrapper that carries ``mark_text``, if there is one.

    A wrapper of an earlier daemon (`/bin/sh -c ...`, the command in argv) is found as well.
    """
    mark = mark_text.encode()
    for listed in listed_pids():
        argv = _argv(listed)
        if argv is None or len(argv) < 3 or argv[1] != b"-c" or argv[-1] != mark:
            continue
        pid = int(listed)
        started = start_time(pid)
        if started is not None:
            return pid, started
    return None


@attrs.frozen
class FoundWrapper:
    pid: int
    start_time: int
    task_id: str
    serial: str
    cmd: str
    cwd: str


def find_wrappers(tasks_dir: Path) -> list[FoundWrapper]:
    """Every live wrapper whose exit file is in ``tasks_dir``: the tasks of this state directory."""
    found = []
    for pid in listed_pids():
        wrapper = _wrapper_of(pid, tasks_dir)
        if wrapper is not None:
            found.append(wrapper)
    return found


def _wrapper_of(pid: str, tasks_dir: Path) -> FoundWrapper | None:
    """Process ``pid``, if it is a live wrapper whose exit file is in ``tasks_dir``."""
    argv = _argv(pid)
    if argv is None or not _is_wrapper(argv):
        return None
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    exit_file, _fd, mark = (a.decode(errors="surrogateescape") for a in argv[4:])
    exit_path = Path(exit_file)
    started = start_time(int(pid))
    if exit_path.parent != tasks_dir or not mark.startswith("hive-bash-task:") or started is None:
        return None
    task_id = exit_path.name.removesuffix(".exit")
    try:
        cmd_bytes = read_regular(tasks_dir / f"{task_id}.cmd")
    except OSError:
        cmd_bytes = None
    cmd = None if cmd_bytes is None else cmd_bytes.decode(errors="surrogateescape")
    return FoundWrapper(
        pid=int(pid),
        start_time=started,
        task_id=task_id,
        serial=mark.removeprefix("hive-bash-task:"),
        cmd=cmd if cmd is not None else f"(unknown: {task_id}.cmd could not be read)",
        cwd=cwd,
    )
