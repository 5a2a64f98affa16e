"""``hive``: the operator's command line over hive's services."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hive import __version__

if TYPE_CHECKING:
    from hive.bash.client import CallResult

# The bash tools' limits, restated here: `hive bash` must not import the daemon's modules to
# learn them (it would cost the MCP SDK's import, most of a second, on every command).
MAX_WAIT = 30.0
TASK_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _socket_help() -> str:
    return "the daemon's socket [HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` about to be parsed, only what it needs is imported."""
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
    if command in (None, "run"):
        # hive.turn brings Trio and the runtimes with it: not for the other commands.
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
    run.add_argument(
        "cmd", metavar="CMD", help="the shell command (run under bash, as bash -c would; up to 1 MiB)"
    )
    run.add_argument(
        "--name",
        type=_task_name,
        help="a memorable id for the task (letters, digits, '.', '_', '-'; up to 64)",
    )
    run.add_argument(
        "--timeout", type=_timeout, metavar="S", help="stop the task after S seconds (timed_out)"
    )
    run.add_argument(
        "--wait",
        type=_wait,
        default=3.0,
        metavar="S",
        help=f"wait up to S seconds for it to end (at most {MAX_WAIT:g}; default 3)",
    )
    run.set_defaults(handler=_bash_run)

    status = bash.add_parser("status", parents=[common], help="a task's status and output tail")
    status.add_argument("id", metavar="ID")
    status.add_argument(
        "--wait",
        type=_wait,
        default=0.0,
        metavar="S",
        help=f"wait up to S seconds for it to end (at most {MAX_WAIT:g})",
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


# -- hive bash -------------------------------------------------------------------------------------
#
# `hive bash` speaks to the daemon with hive.bash.client, which is standard library only: no
# Trio, no MCP SDK, none of the daemon's modules. Its flags are checked here, so that a mistake
# is named in the CLI's terms (--wait, not the tool's wait_seconds); what the daemon still
# refuses is told in those terms too (see _in_cli_terms).


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


def _wait(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give 0 (answer at once) to {MAX_WAIT:g}")
    return value


def _timeout(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be more than 0 seconds; leave --timeout out for none"
        )
    return value


def _task_name(text: str) -> str:
    if not TASK_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a task name: use 1 to 64 ASCII letters, digits, '.', '_' or '-'"
        )
    return text


# The daemon's messages are written for an agent calling its MCP tools; these rewrite the
# tools' calls and argument names into the commands and flags of `hive bash`.
_CLI_TERMS = [
    (re.compile(r"\bstatus\('([^']*)', wait_seconds=([0-9.]+)\)"), r"`hive bash status \1 --wait \2`"),
    (re.compile(r"\bstop\('([^']*)'\)"), r"`hive bash stop \1`"),
    (re.compile(r"`list`"), "`hive bash ls`"),
    (re.compile(r"`(run|status|stop)`"), r"`hive bash \1`"),
    (re.compile(r"\bwait_seconds\b"), "--wait"),
    (re.compile(r"\btimeout_secs\b"), "--timeout"),
]


def _in_cli_terms(text: str) -> str:
    for pattern, replacement in _CLI_TERMS:
        text = pattern.sub(replacement, text)
    return text


def _next_steps(task_id: object) -> str:
    return (
        f"It runs in the background: `hive bash status {task_id} --wait {MAX_WAIT:g}` waits for it, "
        f"`hive bash stop {task_id}` ends it."
    )


def for_operator(result: CallResult) -> str:
    """A tool's answer as the operator reads it.

    The daemon's text is for the agent: it names the MCP tools, and it promises a wake, which
    reaches the agent (if the daemon has an agent socket at all), never the operator. So the
    answer of a `run` still going is told from its structured content, and in a status the line
    on what to do about a running task is replaced; the output tails are left as they are.
    """
    info = result.structured
    if result.is_error:
        return _in_cli_terms(result.text)
    if "stdout_path" in info and "stdout" not in info:  # `run` answered before its task ended
        lines = [f"task started: id={info.get('id')}", _next_steps(info.get("id"))]
        lines += [f"stdout: {info.get('stdout_path')}", f"stderr: {info.get('stderr_path')}"]
        previous = info.get("previous")
        if isinstance(previous, dict):
            code = previous.get("exit_code")
            ended = f"{previous.get('state')}" + (f", exit code {code}" if code is not None else "")
            lines.insert(0, f"(the previous task named {previous.get('id')} had ended: {ended})")
        return "\n".join(lines)
    lines = result.text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("--- stdout ("):
            break  # the output follows: the task's own words, not the daemon's
        if line.startswith("It runs in the background"):
            lines[i] = _next_steps(info.get("id"))
    return "\n".join(lines)


def _call(args: argparse.Namespace, tool: str, arguments: dict[str, Any]) -> int:
    from hive.bash._errors import BashError
    from hive.bash.client import connect
    from hive.bash.relay import default_socket

    try:
        with connect(args.socket or default_socket()) as client:
            result = client.call(tool, arguments)
    except (BashError, OSError) as exc:
        # The daemon unreachable, gone mid-call, or answering nonsense: one line, no traceback.
        print(f"hive: {_in_cli_terms(' '.join(str(exc).split()))}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.structured, indent=2))
    if result.is_error:
        print(f"hive: {for_operator(result)}", file=sys.stderr)
        return 1
    if not args.json:
        print(for_operator(result))
    return 0


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
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_of(argv)).parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return code


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (the top level takes no option with a value), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


if __name__ == "__main__":
    sys.exit(main())
