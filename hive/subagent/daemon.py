"""The subagent daemon: holds the sessions and their turns, and serves the tools on ``<state>/subagent.sock``.

``hive-subagent-mcp`` is spawned by the parent agent for each of its turns, so the turns live
here, in a process of their own that it connects to or starts on first use
(``python -m hive.subagent.daemon``); it serves the four tools as MCP through the kit
(``hive.daemon``). SIGINT or SIGTERM stops it: every running turn takes its
stop path (SIGINT to its agent), and its end is told at the next start.
"""

from __future__ import annotations

# First, before the imports (a second or more on a loaded machine): a stop that comes while they
# run ends the daemon quietly; its own handlers take over later.
from hive._signals import exiting_quietly_on_stops

exiting_quietly_on_stops()

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import attrs
import trio

from hive import __version__, sdnotify, telemetry
from hive._flags import add_log_level
from hive._main import run_main
from hive._state_dir import StateDirLock, default_state_dir, lock_state_dir
from hive._unix import open_unix_listener
from hive.daemon import serve_mcp
from hive.runtime import guarding_agents
from hive.subagent._manager import SubagentManager
from hive.subagent._server import make_mcp_server
from hive.subagent._store import Store
from hive.subagent._tools import SubagentTools

log = logging.getLogger("hive.subagent.daemon")

SOCKET_FLAG = "--socket (or HIVE_SUBAGENT_SOCKET)"


@attrs.frozen
class DaemonConfig:
    """What ``serve_daemon`` serves: the state directory and the socket."""

    state_dir: Path
    socket: Path
    ready_fd: int | None = None
    """A descriptor to write ``ready`` to (then close) once the socket is served."""


def _lock(store: Store) -> StateDirLock:
    # It holds this daemon's pid, for an operator (and a test) to stop: SIGINT to it.
    return lock_state_dir(
        store.state_dir,
        store.lock.name,
        holder="subagent daemon",
        advice="use it, or give this one another --state-dir",
    )


async def serve_daemon(
    config: DaemonConfig,
    *,
    manager_options: dict[str, object] | None = None,
    task_status: trio.TaskStatus[SubagentManager] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled."""
    store = Store(config.state_dir)
    lock = _lock(store)  # the state directory made first, or refused saying why
    try:
        store.create_dirs()
        manager = SubagentManager(store, **(manager_options or {}))  # type: ignore[arg-type]
        server = make_mcp_server(SubagentTools(manager))
        async with (
            open_unix_listener(config.socket, backlog=256, known_as=SOCKET_FLAG) as listener,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(manager.serve)
            await nursery.start(serve_mcp, listener, server)
            log.info("listening on %s (state in %s)", config.socket, config.state_dir)
            task_status.started(manager)
    finally:
        lock.close()  # no pid left behind for anyone to signal once this one is gone


def _ready(fd: int | None) -> None:
    sdnotify.notify("READY=1")
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, b"ready\n")
    # The spawner reads to the end of this pipe: let it go (stdout, if that is what it was, to /dev/null).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    if fd > 2:
        os.close(fd)


async def _main(config: DaemonConfig) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        # The sentinel sends each agent's whole process group SIGINT if this daemon dies while it runs.
        async with guarding_agents(), trio.open_nursery() as nursery:
            await nursery.start(serve_daemon, config)
            _ready(config.ready_fd)
            async for signum in signals:
                log.info("%s: stopping; running turns are stopped with SIGINT", signal.Signals(signum).name)
                sdnotify.notify("STOPPING=1")
                nursery.cancel_scope.cancel()
                break


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hive.subagent.daemon",
        description="Hold subagent sessions and run their turns, serving hive-subagent-mcp on a Unix socket. "
        "hive-subagent-mcp starts it on first use; SIGINT or SIGTERM stops it, stopping running turns with "
        "SIGINT.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="where sessions live (subagents/) [HIVE_STATE_DIR; default $XDG_STATE_HOME/hive]",
    )
    parser.add_argument(
        "--socket",
        type=Path,
        help="the socket to serve [HIVE_SUBAGENT_SOCKET; default <state-dir>/subagent.sock]",
    )
    parser.add_argument("--ready-fd", type=int, help="write 'ready' to this descriptor once serving")
    parser.add_argument(
        "--detach", action="store_true", help="fork at once and serve from the child (the parent exits 0)"
    )
    add_log_level(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hive.subagent.daemon``: serve until SIGINT or SIGTERM; the exit status (README, "Exit status")."""
    return run_main("hive-subagent-daemon", partial(_run, argv))


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.detach and os.fork() > 0:
        # Before any thread or event loop exists: the child is the daemon, reparented away
        # from whoever started it, who reaps this parent at once.
        os._exit(0)
    state_dir = (args.state_dir or default_state_dir()).absolute()
    socket_path = args.socket or (
        Path(os.environ["HIVE_SUBAGENT_SOCKET"]) if os.environ.get("HIVE_SUBAGENT_SOCKET") else None
    )
    config = DaemonConfig(state_dir, (socket_path or Store(state_dir).socket).absolute(), args.ready_fd)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="hive-subagent-daemon: %(levelname)s: %(message)s",
    )
    # The daemon runs agents; it is nested in no Claude Code, whoever started it.
    os.environ.pop("CLAUDECODE", None)
    with telemetry.exporting("hive-subagent-daemon"):
        trio.run(_main, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
