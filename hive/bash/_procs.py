"""Process-level helpers for bash tasks: the wrapper, process groups, pid identity, exit waits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import attrs
import trio

# The wrapper runs the command in the *foreground* of a shell that traps SIGINT with a
# handler: an `&` child of a non-interactive shell would start with SIGINT ignored, and an
# ignored signal (trap '') would be inherited. The command runs in a subshell, where the
# trap is reset to the default: `sh -c CMD` semantics (the same $0, no positional
# parameters, `exit` ends only the command) for one fork and no exec of a second shell.
# The status file is written only after the command has ended and is read only after the
# wrapper has exited, so a plain redirect is enough (an `mv` would cost a fork and exec).
# $3, unused by the script, is a mark by which a restarted daemon finds the wrapper.
WRAPPER = """trap : INT; (eval "set --; $1"); rc=$?; printf '%s\\n' "$rc" >"$2\""""


def wrapper_mark(serial: str) -> str:
    return f"hive-bash-task:{serial}"


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


def spawn_task(cmd: str, *, mark: str, cwd: Path, stdout: int, stderr: int, exit_file: Path) -> Child:
    """Start ``cmd`` under the wrapper, leading a new session, its output on the given fds.

    Blocking (fork and exec): call it from a worker thread, as trio's own open_process does.
    """
    popen = subprocess.Popen(
        ["/bin/sh", "-c", WRAPPER, "sh", cmd, str(exit_file), mark],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        start_new_session=True,
    )
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


def find_wrapper(mark_text: str) -> tuple[int, int] | None:
    """The pid and start time of the live wrapper that carries ``mark_text``, if there is one."""
    mark = b"\0" + mark_text.encode() + b"\0"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if cmdline.startswith(b"/bin/sh\0-c\0") and mark in cmdline:
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
    head = ["/bin/sh", "-c", WRAPPER, "sh"]
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:-1]
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if len(argv) != 7 or [a.decode(errors="replace") for a in argv[:4]] != head:
            continue
        cmd, exit_file, mark = (a.decode(errors="surrogateescape") for a in argv[4:])
        exit_path = Path(exit_file)
        started = start_time(int(entry.name))
        if exit_path.parent != tasks_dir or not mark.startswith("hive-bash-task:") or started is None:
            continue
        found.append(
            FoundWrapper(
                pid=int(entry.name),
                start_time=started,
                task_id=exit_path.name.removesuffix(".exit"),
                serial=mark.removeprefix("hive-bash-task:"),
                cmd=cmd,
                cwd=cwd,
            )
        )
    return found
