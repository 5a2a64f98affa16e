"""``hive bash``: run and inspect background bash tasks through the daemon's socket."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from hive._limits import MAX_NAME, MAX_WAIT, NAME_RULE, is_name
from hive.cli._types import timeout, wait

if TYPE_CHECKING:
    from hive.bash.client import CallResult

# -- hive bash -------------------------------------------------------------------------------------
#
# `hive bash` speaks to the daemon with hive.bash.client, which is standard library only: no
# Trio, no MCP SDK, none of the daemon's modules. Its flags are checked here, so that a mistake
# is named in the CLI's terms (--wait, not the tool's wait_seconds); what the daemon still
# refuses is told in those terms too (see _in_cli_terms).


def _socket_help() -> str:
    return "the daemon's socket [HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]"


def add_bash_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        help=f"a memorable id for the task (letters, digits, '.', '_', '-'; up to {MAX_NAME})",
    )
    run.add_argument("--timeout", type=timeout, metavar="S", help="stop the task after S seconds (timed_out)")
    _add_wait(run, default=3.0)
    run.set_defaults(handler=_bash_run)

    status = bash.add_parser("status", parents=[common], help="a task's status and output tail")
    status.add_argument("id", metavar="ID")
    _add_wait(status, default=0.0)
    status.set_defaults(handler=_bash_status)

    stop = bash.add_parser(
        "stop", parents=[common], help="stop a running task (SIGINT, SIGKILL after the grace)"
    )
    stop.add_argument("id", metavar="ID")
    stop.set_defaults(handler=_bash_stop)

    ls = bash.add_parser("ls", parents=[common], help="every known task, newest first")
    ls.set_defaults(handler=_bash_ls)


def _add_wait(command: argparse.ArgumentParser, *, default: float) -> None:
    """Give ``command`` the flag ``--wait S`` (the tool's ``wait_seconds``), ``default`` when left out."""
    shown = f"; default {default:g}" if default else ""
    command.add_argument(
        "--wait",
        type=wait,
        default=default,
        metavar="S",
        help=f"wait up to S seconds for it to end (at most {MAX_WAIT:g}{shown})",
    )


def _task_name(text: str) -> str:
    if not is_name(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a task name: use {NAME_RULE}")
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
    from hive.bash import BashError
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
