"""Spawning an agent, and spawning one before Trio is imported.

``hive run`` knows the command of its agent before it has imported Trio, the runtime and the
backend, which take longer than starting Python does. ``prestart`` spawns that agent at once,
so that those imports overlap the agent's own start; the runtime's ``start_agent``, asked for
exactly that command (argv, directory, environment, stdin), adopts the running process instead
of spawning another. What nobody adopts is sent SIGINT by ``release_prestarted`` (in Trio) or
``interrupt_unclaimed`` (without it), never more.

Nothing here imports Trio.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from hive._spawn import Process, start

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_SIZE = 1 << 20


@attrs.frozen
class AgentCommand:
    """How an agent is spawned: its argv and environment, and its stdin: a pipe to hive (ACP,
    ``stdin_pipe``), a pipe that carries ``stdin_data`` and is then closed (claude's prompt:
    on its command line any local user could read it), or ``/dev/null``."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    stdin_pipe: bool = False
    stdin_data: bytes | None = None


@attrs.define(eq=False)
class Spawned:
    """A process just spawned leading its own session, and the parent's ends of its pipes."""

    popen: Process
    argv: tuple[str, ...]
    stdin: int | None
    stdout: int
    stderr: int
    stdin_rest: bytes = b""
    """What of ``stdin_data`` the pipe could not take at once: the runtime writes it, then
    closes ``stdin`` (which is None when all of it went, and the pipe is closed already)."""


@attrs.define(eq=False)
class Prestart:
    """An agent spawned before Trio, waiting for the runtime to ask for it."""

    spawned: Spawned
    cwd: Path
    command: AgentCommand

    def matches(self, cwd: Path, command: AgentCommand) -> bool:
        """Whether this agent is the one the runtime would spawn for ``command`` in ``cwd``."""
        return (
            self.cwd == cwd
            and self.command.argv == command.argv
            and dict(self.command.env) == dict(command.env)
            and self.command.stdin_pipe == command.stdin_pipe
            and self.command.stdin_data == command.stdin_data
        )


_WAITING: list[Prestart] = []


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin_pipe: bool,
    stdin_data: bytes | None = None,
    follow_parent: bool = True,
) -> Spawned:
    """Start ``argv`` in a new session (so it leads its process group), stdout and stderr
    piped, stdin a pipe, a pipe carrying ``stdin_data``, or ``/dev/null``. With
    ``follow_parent``, it is sent SIGINT if the calling thread dies, so call it on a thread
    that lives as long as this process (see ``hive._spawn``); without, the caller has it guarded
    otherwise (``_guard``). Of ``stdin_data``, what the pipe takes without blocking is written here (the
    pipe is widened to 1 MiB first), and the pipe closed if that was all; the rest is left in
    ``Spawned.stdin_rest``. Raises what ``subprocess.Popen`` raises."""
    ours: list[int] = []
    theirs: list[int] = []
    piped = stdin_pipe or stdin_data is not None
    try:
        if piped:
            child_in, parent_in = os.pipe()
            ours.append(parent_in)
        else:
            child_in = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        theirs.append(child_in)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        ours += [out_read, err_read]
        theirs += [out_write, err_write]
        with contextlib.suppress(OSError):
            # 1 MiB rather than 64 KiB: a fast writer wakes the reader a sixteenth as often.
            fcntl.fcntl(out_read, F_SETPIPE_SZ, PIPE_SIZE)
        if stdin_data is not None:
            with contextlib.suppress(OSError):
                # So that a prompt of up to 1 MiB is written whole here, before Trio.
                fcntl.fcntl(parent_in, F_SETPIPE_SZ, PIPE_SIZE)
        popen = start(
            argv,
            cwd=cwd,
            env=env,
            stdio=(child_in, out_write, err_write),
            death_signal=signal.SIGINT if follow_parent else None,
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    if stdin_data is None:
        return Spawned(popen, tuple(argv), parent_in if piped else None, out_read, err_read)
    rest = _write_what_fits(parent_in, stdin_data)
    if not rest:
        os.close(parent_in)
        return Spawned(popen, tuple(argv), None, out_read, err_read)
    return Spawned(popen, tuple(argv), parent_in, out_read, err_read, rest)


def _write_what_fits(fd: int, data: bytes) -> bytes:
    """Write ``data`` to the pipe ``fd`` as far as it goes without blocking; the rest (nothing
    also when the reader has gone: it will not read the rest either)."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BlockingIOError:
        pass
    except BrokenPipeError:
        return b""
    return bytes(view)


def prestart(command: AgentCommand, *, cwd: Path) -> Prestart | None:
    """Spawn ``command`` now, for ``start_agent`` to adopt. None if it cannot be spawned:
    ``start_agent`` will try again, and say why."""
    try:
        spawned = spawn(
            command.argv,
            cwd=cwd,
            env=command.env,
            stdin_pipe=command.stdin_pipe,
            stdin_data=command.stdin_data,
        )
    except OSError:
        return None
    waiting = Prestart(spawned, cwd, command)
    _WAITING.append(waiting)
    return waiting


def claim(command: AgentCommand, *, cwd: Path) -> Spawned | None:
    """The process prestarted for exactly this command, now the caller's; or None."""
    for index, waiting in enumerate(_WAITING):
        if waiting.matches(cwd, command):
            del _WAITING[index]
            return waiting.spawned
    return None


def unclaimed() -> list[Spawned]:
    """Every prestarted process nobody claimed, now the caller's."""
    spawned = [waiting.spawned for waiting in _WAITING]
    _WAITING.clear()
    return spawned


def interrupt_unclaimed() -> list[int]:
    """SIGINT to the group of every prestarted process nobody claimed (when hive exits before
    its runtime could take them); their pids. They are not waited for: each ends by itself."""
    # Imported here, off `hive run`'s way to its agent's spawn (it brings dataclasses, select).
    from hive._proc import signal_group

    pids = []
    for spawned in unclaimed():
        if spawned.popen.poll() is None and signal_group(spawned.popen.pid, signal.SIGINT):
            pids.append(spawned.popen.pid)
    return pids
