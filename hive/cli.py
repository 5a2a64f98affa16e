"""``hive``: the operator's command line over hive's services."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from hive import __version__


def _socket_help() -> str:
    return "the daemon's socket [HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hive", description="Operate hive: background bash tasks, the demo."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="start a daemon on a temporary state directory and run a few tasks through the real relay",
        description="Start hive-bash-daemon on a temporary state directory with a demo agent socket, "
        "run tasks through hive-bash-mcp with the MCP SDK's client (one that ends inline, one that ends later and "
        "wakes the agent socket, one that fails), print what happened, and clean up.",
    )
    demo.set_defaults(handler=_demo)

    run = commands.add_parser(
        "run",
        help="run one agent turn, printing its stream-json",
        description="Run one turn through the runtime HIVE_RUNTIME names (claude, the default, runs "
        "HIVE_CLAUDE_COMMAND or `claude`; acp runs HIVE_ACP_COMMAND with HIVE_ACP_ARGS and HIVE_ACP_ENV). "
        "The turn's stream-json goes to stdout, one message a line; the session id goes to stderr, for "
        "--session next time. Exit status 0 when the turn's result is not an error. SIGINT or SIGTERM "
        "stops the turn (SIGINT to the agent) and prints its result; a second one stops waiting for it.",
    )
    from hive.turn import add_arguments

    add_arguments(run)
    run.set_defaults(handler=_run_turn)

    bash = commands.add_parser("bash", help="run and inspect background bash tasks").add_subparsers(
        dest="bash_command", required=True, metavar="COMMAND"
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--socket", help=_socket_help())
    common.add_argument("--json", action="store_true", help="print the tool's structured result as JSON")

    run = bash.add_parser("run", parents=[common], help="run a command in the background")
    run.add_argument("cmd", metavar="CMD", help="the shell command (run with sh -c)")
    run.add_argument("--name", help="a memorable id for the task")
    run.add_argument("--timeout", type=float, metavar="S", help="stop the task after S seconds (timed_out)")
    run.add_argument(
        "--wait", type=float, default=3.0, metavar="S", help="wait up to S seconds (max 30; default 3)"
    )
    run.set_defaults(handler=_bash_run)

    status = bash.add_parser("status", parents=[common], help="a task's status and output tail")
    status.add_argument("id", metavar="ID")
    status.add_argument(
        "--wait", type=float, default=0.0, metavar="S", help="wait up to S seconds for it to end"
    )
    status.set_defaults(handler=_bash_status)

    stop = bash.add_parser(
        "stop", parents=[common], help="stop a running task (SIGINT, SIGKILL after the grace)"
    )
    stop.add_argument("id", metavar="ID")
    stop.set_defaults(handler=_bash_stop)

    ls = bash.add_parser("ls", parents=[common], help="every known task, newest first")
    ls.set_defaults(handler=_bash_ls)
    return parser


def _run_turn(args: argparse.Namespace) -> int:
    from hive.turn import run_turn

    return run_turn(args)


def _demo(args: argparse.Namespace) -> int:
    from hive.demo import run_demo

    return run_demo()


def _call(args: argparse.Namespace, tool: str, arguments: dict[str, Any]) -> int:
    import trio

    from hive.bash._errors import DaemonUnavailable
    from hive.bash.client import open_bash_client
    from hive.bash.relay import default_socket

    async def call() -> int:
        async with open_bash_client(args.socket or default_socket()) as client:
            result = await client.call(tool, arguments)
        if args.json:
            print(json.dumps(result.structured, indent=2))
        elif not result.is_error:
            print(result.text)
        if result.is_error:
            print(f"hive: {result.text}", file=sys.stderr)
            return 1
        return 0

    try:
        return trio.run(call)
    except DaemonUnavailable as exc:
        print(f"hive: {exc}", file=sys.stderr)
        return 1


def _bash_run(args: argparse.Namespace) -> int:
    arguments: dict[str, Any] = {"cmd": args.cmd, "wait_seconds": args.wait}
    if args.name is not None:
        arguments["name"] = args.name
    if args.timeout is not None:
        arguments["timeout_secs"] = args.timeout
    return _call(args, "run", arguments)


def _bash_status(args: argparse.Namespace) -> int:
    return _call(args, "status", {"id": args.id, "wait_seconds": args.wait})


def _bash_stop(args: argparse.Namespace) -> int:
    return _call(args, "stop", {"id": args.id})


def _bash_ls(args: argparse.Namespace) -> int:
    return _call(args, "list", {"limit": 0})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
