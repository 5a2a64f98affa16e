"""``hive-bash-daemon``: owns bash tasks and serves the bash tools over MCP on a Unix socket."""

from __future__ import annotations

# First, before the imports (a second or more on a loaded machine): a stop that comes while they
# run ends the daemon quietly; its own handlers take over later.
from hive._signals import exiting_quietly_on_stops

exiting_quietly_on_stops()

import argparse
import gc
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import attrs

from hive import __version__, telemetry
from hive._flags import add_log_level, from_environment, yes_no
from hive._main import run_main
from hive._state_dir import StateDirLock, default_state_dir, lock_state_dir
from hive.bash._settings import TaskSettings

if TYPE_CHECKING:
    import trio

    from hive.bash._task_manager import TaskManager

# Trio, the kit's MCP server and the task machinery are imported only once the command line is read
# (see `_import_serving`): a refused start costs an interpreter's start, not theirs.

log = logging.getLogger("hive.bash.daemon")

T = TypeVar("T")


@attrs.frozen
class DaemonConfig:
    """What ``serve_daemon`` serves: its state directory and socket, where it wakes the agent,
    and its limits."""

    state_dir: Path
    socket: Path
    agent_socket: Path | None = None
    tasks: TaskSettings = attrs.field(factory=TaskSettings)
    """How its tasks run (`serve_daemon` gives them the cgroup parent it opens; `main` makes the
    daemon the child subreaper, to reap the orphans it adopts)."""
    wake_retry_max: float = 5.0
    cgroups: bool = True
    """Give each task a cgroup v2 of its own where one can be made (see `hive.bash.procs._cgroups`);
    False: the subreaper and the tag hold every task, as where none can be made."""
    retain_days: float = 7.0
    retain_bytes: int | None = None
    """None: no limit on the bytes kept (only the age counts)."""
    prune_interval: float = 600.0


SOCKET_FLAG = "--socket (or HIVE_BASH_SOCKET)"
_DEFAULTS = TaskSettings(workdir=Path())
"""The tasks' settings where no flag or variable gives them (their help says these)."""


def _lock_state_dir(state_dir: Path) -> StateDirLock:
    return lock_state_dir(state_dir, "bash-daemon.lock", holder="hive-bash-daemon")


def _import_serving() -> None:
    """Import what serving takes (Trio, the kit's MCP server, the task manager): `main` does so once its
    command line is read, before it freezes what the imports made."""
    import hive.bash._server
    import hive.bash._task_manager  # noqa: F401
    from hive.daemon import serve_mcp  # noqa: F401


async def serve_daemon(
    config: DaemonConfig, *, task_status: trio.TaskStatus[TaskManager] | None = None
) -> None:
    """Run the daemon until cancelled. Cancelling it leaves every task running for the next start."""
    import trio

    from hive._unix import open_unix_listener
    from hive.agent_socket import WakeCourier
    from hive.bash._server import make_mcp_server
    from hive.bash._task_manager import TaskManager
    from hive.bash._tools import BashTools
    from hive.bash.files._retention import DAY, Pruner, Retention
    from hive.bash.files._store import TaskStore
    from hive.bash.procs import _cgroups
    from hive.bash.procs._cgroups import open_task_parent
    from hive.bash.procs._namespaces import task_unshare
    from hive.bash.procs._procs import bash_path
    from hive.daemon import serve_mcp

    if task_status is None:
        task_status = trio.TASK_STATUS_IGNORED
    store = TaskStore(config.state_dir)
    lock = _lock_state_dir(config.state_dir)  # the state directory made first, or refused saying why
    cgroup_parent = None
    try:
        store.create_dirs()
        courier = WakeCourier[tuple[str, str]](
            agent_socket=config.agent_socket, retry_max=config.wake_retry_max
        )
        cgroup_parent = open_task_parent(config.state_dir) if config.cgroups else None
        unshare = await trio.to_thread.run_sync(task_unshare, bash_path())
        tasks = attrs.evolve(config.tasks, cgroup_parent=cgroup_parent, unshare=unshare)
        manager = TaskManager(store, tasks, courier)
        # The socket goes at a clean stop (a client then finds no socket, not a refusal); a live
        # socket at the path is another daemon's, and it keeps it.
        async with (
            open_unix_listener(config.socket, backlog=512, known_as=SOCKET_FLAG) as listener,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(manager.serve)
            retention = Retention(
                max_age=config.retain_days * DAY,
                max_bytes=config.retain_bytes,
                interval=config.prune_interval,
            )
            # Its first pass ends before the socket answers: `list` never shows a task due to go.
            await nursery.start(Pruner(manager, retention).run)
            await nursery.start(serve_mcp, listener, make_mcp_server(BashTools(manager)))
            log.info("listening on %s (state in %s)", config.socket, config.state_dir)
            task_status.started(manager)
    finally:
        if cgroup_parent is not None:
            # The empty ones go, and the parent if no task is left in it; the next start finds
            # the others again.
            for name in _cgroups.leftovers(cgroup_parent):
                _cgroups.remove(cgroup_parent / name)
            _cgroups.remove(cgroup_parent)
        lock.close()


# -- command line ---------------------------------------------------------------------------------


def _amount(text: str, unit: str) -> float:
    """``text`` as a finite number of ``unit`` (seconds, days), 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of {unit}, 0 or more")
    return value


def _seconds(text: str) -> float:
    return _amount(text, "seconds")


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


def _size(text: str) -> int:
    match = _SIZE.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write e.g. 5368709120, 512M or 5GiB")
    number, unit = match.groups()
    value = int(float(number) * 1024 ** " KMGT".index(unit.upper() or " "))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 bytes")
    return value


def _count(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; write e.g. 4") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more (leave it unset for no limit)")
    return value


def _days(text: str) -> float:
    return _amount(text, "days")


UNLIMITED = 0
"""What `_retained_size` makes of ``unlimited``."""


def _retained_size(text: str) -> int:
    if text.strip().lower() == "unlimited":
        return UNLIMITED
    return _size(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hive-bash-daemon",
        description="Run shell commands in the background for an agent and serve the MCP tools run, status, "
        "stop and list on a Unix socket (one MCP session per connection; hive-bash-mcp relays an MCP "
        "client's stdio to it). Tasks survive a daemon restart: the next start re-adopts them. "
        "SIGINT or SIGTERM stops the daemon and leaves its tasks running.",
        epilog="Each option falls back to the environment variable named in its help, then to its default.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="where task records, output (bash-tasks/) and loose ends (mcp-loose-ends/) live "
        "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]",
    )
    parser.add_argument(
        "--socket",
        type=Path,
        help="the MCP socket to serve [HIVE_BASH_SOCKET; default <state-dir>/bash.sock]",
    )
    parser.add_argument(
        "--agent-socket",
        type=Path,
        help="the agent's socket, where wakes are sent when tasks end [HIVE_AGENT_SOCKET; default: no wakes "
        "are sent, and loose ends accumulate in <state-dir>/mcp-loose-ends/]",
    )
    parser.add_argument(
        "--kill-grace",
        type=_seconds,
        help="seconds between SIGINT and SIGKILL when a task times out or is stopped "
        f"[HIVE_BASH_KILL_GRACE; default {_DEFAULTS.kill_grace:g}]",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="the directory tasks run in [HIVE_BASH_WORKDIR; default: the current one]",
    )
    parser.add_argument(
        "--max-output-bytes",
        type=_size,
        help="stop a task whose stdout and stderr together pass this size (e.g. 512M, 5GiB) "
        f"[HIVE_BASH_MAX_OUTPUT_BYTES; default {_DEFAULTS.max_output_bytes // 1024**3}GiB]",
    )
    parser.add_argument(
        "--output-check-secs",
        type=_seconds,
        help="how often the daemon checks its tasks: the disk, what ended tasks left running, and "
        "the output cap where inotify cannot watch a task's output (it is checked as it grows) "
        f"[HIVE_BASH_OUTPUT_CHECK_SECS; default {_DEFAULTS.output_check_interval:g}]",
    )
    parser.add_argument(
        "--no-cgroups",
        action="store_true",
        default=None,
        help="hold tasks by the subreaper, their environment tag and cgroup namespace, not by a cgroup v2 per "
        "task (the way used anyway where no cgroup can be made) [HIVE_BASH_NO_CGROUPS=1]",
    )
    parser.add_argument(
        "--wake-retry-max",
        type=_seconds,
        help="the longest wait between attempts to reach an absent agent socket "
        "[HIVE_BASH_WAKE_RETRY_MAX; default 5]",
    )
    parser.add_argument(
        "--retain-days",
        type=_days,
        metavar="DAYS",
        help="prune the record and output of a task (and those of the earlier runs of a reused name) "
        "this many days after it ended; with 0, at the first pass after its end reached the agent. A "
        "task that still runs, or whose end the agent has not been told yet, is never pruned "
        "[HIVE_BASH_RETAIN_DAYS; default 7]",
    )
    parser.add_argument(
        "--retain-bytes",
        type=_retained_size,
        metavar="SIZE",
        help="also prune the oldest ended tasks, however young, while all task files together hold more "
        "than this (e.g. 2GiB), or `unlimited`; running tasks and owed ends count toward it but are "
        "never pruned [HIVE_BASH_RETAIN_BYTES; default unlimited, so that only age prunes and no young "
        "output goes by surprise: set it where the disk is small]. Pruning runs at start and every 10 "
        "minutes, oldest first",
    )
    parser.add_argument(
        "--max-running",
        type=_count,
        metavar="N",
        help="run at most N tasks at once: a task started past the limit is `pending`, listed with its "
        "place in line, and starts in order as running tasks end (its timeout counts from its start; "
        "the line survives a restart) [HIVE_BASH_MAX_RUNNING; default: no limit]",
    )
    add_log_level(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def config_from_args(argv: Sequence[str] | None = None) -> tuple[DaemonConfig, str]:
    parser = build_parser()
    args = parser.parse_args(argv)
    state_dir = (args.state_dir or default_state_dir()).absolute()

    def pick(value: T | None, env: str, convert: Callable[[str], T], default: T) -> T:
        return value if value is not None else from_environment(env, convert, default, error=parser.error)

    socket_path = pick(args.socket, "HIVE_BASH_SOCKET", Path, state_dir / "bash.sock")
    agent_socket = pick(args.agent_socket, "HIVE_AGENT_SOCKET", Path, None)
    workdir = pick(args.workdir, "HIVE_BASH_WORKDIR", Path, Path.cwd()).absolute()
    if not workdir.is_dir():
        parser.error(f"--workdir {workdir} is not a directory")

    config = DaemonConfig(
        state_dir=state_dir,
        socket=socket_path.absolute(),
        agent_socket=agent_socket.absolute() if agent_socket else None,
        tasks=TaskSettings(
            workdir=workdir,
            kill_grace=pick(args.kill_grace, "HIVE_BASH_KILL_GRACE", _seconds, _DEFAULTS.kill_grace),
            max_output_bytes=pick(
                args.max_output_bytes, "HIVE_BASH_MAX_OUTPUT_BYTES", _size, _DEFAULTS.max_output_bytes
            ),
            output_check_interval=max(
                0.01,
                pick(
                    args.output_check_secs,
                    "HIVE_BASH_OUTPUT_CHECK_SECS",
                    _seconds,
                    _DEFAULTS.output_check_interval,
                ),
            ),
            max_running=pick(args.max_running, "HIVE_BASH_MAX_RUNNING", _count, None),
        ),
        cgroups=not pick(args.no_cgroups, "HIVE_BASH_NO_CGROUPS", yes_no, False),
        wake_retry_max=max(0.01, pick(args.wake_retry_max, "HIVE_BASH_WAKE_RETRY_MAX", _seconds, 5.0)),
        retain_days=pick(args.retain_days, "HIVE_BASH_RETAIN_DAYS", _days, 7.0),
        retain_bytes=pick(args.retain_bytes, "HIVE_BASH_RETAIN_BYTES", _retained_size, UNLIMITED) or None,
    )
    return config, args.log_level


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_started = False


def _stop_quietly(signum: int, _frame: object) -> None:
    """SIGINT or SIGTERM outside ``_main``'s receiver, never Python's KeyboardInterrupt and its
    traceback: before ``_main`` the daemon exits at once (it has nothing to finish yet); after
    the receiver has closed, the daemon is stopping already and the signal is one more of the
    same (the receiver hands back, to this handler, those it did not take), and is ignored."""
    if not _started:
        os._exit(0)


async def _main(config: DaemonConfig) -> None:
    import trio

    from hive import sdnotify

    global _started  # noqa: PLW0603 - read by the signal handler
    _started = True
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_daemon, config)
            sdnotify.notify("READY=1")
            async for signum in signals:
                log.info(
                    "%s: stopping; running tasks are left for the next start", signal.Signals(signum).name
                )
                sdnotify.notify("STOPPING=1")
                nursery.cancel_scope.cancel()
                break


def main(argv: Sequence[str] | None = None) -> int:
    """``hive-bash-daemon``: serve until SIGINT or SIGTERM (exit 0); the exit status (README, "Exit status")."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop_quietly)
    return run_main("hive-bash-daemon", partial(_run, argv))


def _run(argv: Sequence[str] | None) -> int:
    config, level = config_from_args(argv)
    _import_serving()
    import trio

    from hive.bash.procs._limits import raise_open_files_limit
    from hive.bash.procs._procs import become_subreaper

    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="hive-bash-daemon: %(levelname)s: %(message)s"
    )
    # A task's processes that leave its session and are orphaned stay the daemon's children,
    # where a stop can still find them (see hive.bash.procs._procs).
    if become_subreaper():
        config = attrs.evolve(config, tasks=attrs.evolve(config.tasks, reap_orphans=True))
    # Each running task holds an open file in the daemon: take all the room the system allows
    # (`run` refuses, saying why, before the limit is reached; see hive.bash.procs._limits).
    raise_open_files_limit()
    # What the imports made (~90,000 objects) lives as long as the daemon: frozen, it is walked
    # by none of the full collections that the tasks' garbage sets off.
    gc.freeze()
    try:
        with telemetry.exporting("hive-bash-daemon"):
            trio.run(_main, config)
    finally:
        # Ignored from here on: the interpreter's finalization puts back the default action
        # for signals with Python handlers, and a late SIGINT would end the process by it.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
