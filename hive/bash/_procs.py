"""Process-level helpers for bash tasks: the wrapper, process groups, pid identity, exit waits."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
from pathlib import Path

import attrs
import trio

from hive.bash._errors import BashError
from hive.bash._store import read_regular

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
WRAPPER = (
    "trap : INT; IFS= read -r -d '' __hive_cmd; exec </dev/null; __hive_fd=$2; "
    '(exec {__hive_fd}>&-; eval "set --; unset -v __hive_cmd __hive_fd; $__hive_cmd"); '
    'rc=$?; printf \'%s\\n\' "$rc" >&"$__hive_fd"'
)
WRAPPER_ARGV0 = "bash"


def wrapper_mark(serial: str) -> str:
    return f"hive-bash-task:{serial}"


class SpawnError(BashError, OSError):
    """The task's wrapper could not be started (bash missing, a bad working directory, no processes left)."""


@functools.cache
def bash_path() -> str:
    """The bash that runs tasks: the first on the daemon's PATH (NixOS has no /bin/bash), else /bin/bash."""
    return shutil.which("bash") or "/bin/bash"


@attrs.define(eq=False)
class Child:
    """A task's wrapper, started by this daemon: waited for through a pidfd, then reaped."""

    popen: subprocess.Popen[bytes]
    pidfd: int

    @property
    def pid(self) -> int:
        return self.popen.pid

    async def wait(self) -> int:
        """Wait for the wrapper to exit and reap it; its return code (negative: killed by a signal)."""
        try:
            await trio.lowlevel.wait_readable(self.pidfd)
        finally:
            os.close(self.pidfd)
        # It has exited, so this reaps it at once.
        return self.popen.wait()


def spawn_task(
    *, cmd_fd: int, exit_fd: int, exit_file: Path, mark: str, cwd: Path, stdout: int, stderr: int
) -> Child:
    """Start the command that ``cmd_fd`` holds under the wrapper, leading a new session.

    ``cmd_fd`` is read from its current offset to its end; ``exit_fd`` receives the exit
    status; the output goes to ``stdout`` and ``stderr``. Blocking (fork and exec): call it
    from a worker thread, as trio's own open_process does. A failure is a :class:`SpawnError`.
    """
    bash = bash_path()
    try:
        popen = subprocess.Popen(
            [bash, "-c", WRAPPER, WRAPPER_ARGV0, str(exit_file), str(exit_fd), mark],
            stdin=cmd_fd,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(exit_fd,),
            cwd=cwd,
            start_new_session=True,
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
    # The child cannot be reaped before we reap it, so its pid is still its own here.
    return Child(popen, os.pidfd_open(popen.pid))


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat from the third (the state) on; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat[stat.rindex(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or None.

    A zombie keeps its start time until it is reaped, so a child that has already exited
    still has one.
    """
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def is_same_process(pid: int, recorded_start: int | None) -> bool:
    """Whether ``pid`` is still the live (not zombie) process that started at ``recorded_start``."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z" and recorded_start == int(fields[19])


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields is not None and fields[0] != b"Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


async def wait_pidfd(pid: int, recorded_start: int | None) -> bool:
    """Wait for a process that is not our child to exit; False if it was already gone (or reused)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        # Check identity after opening: the pidfd now pins this exact process.
        if not is_same_process(pid, recorded_start):
            return False
        await trio.lowlevel.wait_readable(fd)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


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
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        argv = _argv(entry.name)
        if argv is None or len(argv) < 3 or argv[1] != b"-c" or argv[-1] != mark:
            continue
        pid = int(entry.name)
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
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        argv = _argv(entry.name)
        if argv is None or not _is_wrapper(argv):
            continue
        try:
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        exit_file, _fd, mark = (a.decode(errors="surrogateescape") for a in argv[4:])
        exit_path = Path(exit_file)
        started = start_time(int(entry.name))
        if exit_path.parent != tasks_dir or not mark.startswith("hive-bash-task:") or started is None:
            continue
        task_id = exit_path.name.removesuffix(".exit")
        try:
            cmd_bytes = read_regular(tasks_dir / f"{task_id}.cmd")
        except OSError:
            cmd_bytes = None
        cmd = None if cmd_bytes is None else cmd_bytes.decode(errors="surrogateescape")
        found.append(
            FoundWrapper(
                pid=int(entry.name),
                start_time=started,
                task_id=task_id,
                serial=mark.removeprefix("hive-bash-task:"),
                cmd=cmd if cmd is not None else f"(unknown: {task_id}.cmd could not be read)",
                cwd=cwd,
            )
        )
    return found
