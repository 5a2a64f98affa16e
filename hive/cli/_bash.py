"""``hive bash``: run and inspect background bash tasks through the daemon's socket."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from hive._limits import MAX_CMD_BYTES, MAX_NAME, MAX_WAIT, NAME_RULE, is_name, state_dir_path
from hive._text_input import ARG_MAX, in_words, process_stdin, read_text
from hive.cli._bash_answer import (
    EXIT_STATUS_HELP,
    FAILED,
    exit_status,
    for_operator,
    in_cli_terms,
    tool_error_status,
)
from hive.cli._types import capped_wait, timeout, wait

if TYPE_CHECKING:
    from hive.bash.client import CallResult

# `hive bash` speaks to the daemon with hive.bash.client, which is standard library only: no
# Trio, no MCP SDK, none of the daemon's modules. Its flags are checked here, so that a mistake
# is named in the CLI's terms (--wait, not the tool's wait_seconds); what the daemon still
# refuses is told in those terms too (see hive.cli._bash_answer).

STATE_DIR_HELP = (
    "the daemon's state directory, where its socket is unless --socket says otherwise "
    "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]"
)
SOCKET_HELP = "the daemon's socket [HIVE_BASH_SOCKET; default <state-dir>/bash.sock]"
ID_HELP = "the task's id, as `hive bash run` answered it, or the name given with --name"
CMD_HELP = (
    "the shell command, run under bash as `bash -c CMD` would run it. Several words are joined "
    "with one space, as ssh joins them: quote the command to keep it as written, and put `--` "
    "before it if a word starts with '-'. A lone `-` reads it from stdin. Linux limits one "
    f"argument to {ARG_MAX // 1024} KiB: for a longer command, up to {in_words(MAX_CMD_BYTES)}, use `-` or --file"
)
RUN_WORDS = (
    "; hive's flags go before the command's words or after them all, and `--` before a command "
    "that has a word starting with '-' (`hive bash run --wait 5 -- ls -la`)"
)
"""What a ``run`` refused for a word it does not take is told."""
RUN_DESCRIPTION = """\
Run a shell command in the background, under bash (as `bash -c CMD` would), its output going to
files. If it ends within --wait, its status is printed and hive exits with the task's own exit
status. Else the answer is its id, how to follow it, and whether its end will wake the agent: it
does when the daemon has an agent socket, and the wake starts the agent's next turn."""


TAIL_DESCRIPTION = """\
Print a task's output: its stdout on stdout, its stderr on stderr, each from its start or, with
--from-end N, from its last N lines. The output is read through the daemon, from offsets, so
nothing is printed twice and nothing is skipped. With --follow it goes on as the task writes
(the daemon wakes it on each write) and ends once the task has ended and all of its output is
printed, exiting with the task's status as `hive bash run` would; without it, it exits 0."""


class _BashParser(argparse.ArgumentParser):
    """A ``hive bash`` command's parser: words it does not take are refused with its own usage,
    and ``run``'s refusal says where its flags and the command's words go."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            hint = RUN_WORDS if self.prog.endswith(" run") else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed, extras


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], help: str) -> None:
    bash = commands.add_parser(
        "bash",
        help=help,
        description="Run and inspect background bash tasks, through hive-bash-daemon's socket.",
        epilog=EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).add_subparsers(dest="bash_command", required=True, metavar="COMMAND", parser_class=_BashParser)
    common = _BashParser(add_help=False)
    common.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)
    common.add_argument("--socket", metavar="PATH", help=SOCKET_HELP)
    common.add_argument("--json", action="store_true", help="print the tool's structured result as JSON")

    def command(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        return bash.add_parser(
            name,
            parents=[common],
            help=summary,
            description=description or f"{summary[0].upper()}{summary[1:]}.",
            epilog=EXIT_STATUS_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    run = command("run", "run a command in the background", RUN_DESCRIPTION)
    run.add_argument("cmd", nargs="*", default=[], metavar="CMD", help=CMD_HELP)
    run.add_argument(
        "--file",
        metavar="F",
        help=f"read the command from the file F instead of CMD (`-`: from stdin); up to {in_words(MAX_CMD_BYTES)}",
    )
    run.add_argument(
        "--name",
        type=_task_name,
        help=f"a memorable id for the task (letters, digits, '.', '_', '-'; up to {MAX_NAME})",
    )
    run.add_argument("--timeout", type=timeout, metavar="S", help="stop the task after S seconds (timed_out)")
    run.add_argument(
        "--notify-on",
        metavar="PATTERN",
        help="wake the agent with each line of the task's stdout or stderr that this RE2 regular "
        "expression matches (Python's re without backreferences and lookaround; searched in each line; "
        "matches within 200 ms in one wake)",
    )
    run.add_argument(
        "--notify-max",
        type=_wake_count,
        metavar="N",
        help="with --notify-on: the most such wakes the task sends (default 20, at most 1000)",
    )
    _add_wait(run, default=3.0)
    run.set_defaults(handler=_bash_run)

    status = command("status", "a task's status and output tail")
    status.add_argument("id", metavar="ID", help=ID_HELP)
    _add_wait(status, default=0.0)
    status.set_defaults(handler=_bash_status)

    stop = command(
        "stop", "stop a running task (SIGINT, SIGKILL after the grace), or take a pending one out of the line"
    )
    stop.add_argument("id", metavar="ID", help=ID_HELP)
    stop.set_defaults(handler=_bash_stop)

    ls = command("ls", "every known task, newest first (a pending one with its place in line)")
    ls.set_defaults(handler=_bash_ls)

    tail = command(
        "tail", "print a task's output; --follow goes on printing it as it grows", TAIL_DESCRIPTION
    )
    tail.add_argument("id", metavar="ID", help=ID_HELP)
    tail.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="go on printing the output as the task writes it; end once the task has ended and all of "
        "it is printed, with the exit status `hive bash run` gives for it",
    )
    tail.add_argument(
        "--from-end",
        type=_line_count,
        metavar="N",
        help="start at the last N lines of each stream (default: from its start)",
    )
    tail.set_defaults(handler=_bash_tail)


def _add_wait(command: argparse.ArgumentParser, *, default: float) -> None:
    """Give ``command`` the flag ``--wait S`` (the tool's ``wait_seconds``), ``default`` when left out."""
    shown = f"; default {default:g}" if default else ""
    command.add_argument(
        "--wait",
        type=wait,
        default=default,
        metavar="S",
        help=f"wait up to S seconds for it to end (at most {MAX_WAIT:g}: a longer wait is taken as "
        f"{MAX_WAIT:g}, and said so on stderr{shown})",
    )


def _wake_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= 1000:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of wakes: give a whole number from 1 to 1000"
        )
    return count


def _line_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of lines: give a whole number, 0 or more")
    return count


def _task_name(text: str) -> str:
    if not is_name(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a task name: use {NAME_RULE}")
    return text


def bash_socket(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> Path:
    """The daemon's socket: ``--socket``, else ``HIVE_BASH_SOCKET``, else ``bash.sock`` in the
    state directory (``--state-dir``, else :func:`~hive._limits.state_dir_path`), as the
    daemon itself chooses it."""
    if args.socket:
        return Path(args.socket)
    if env.get("HIVE_BASH_SOCKET"):
        return Path(env["HIVE_BASH_SOCKET"])
    return Path(args.state_dir or state_dir_path(env)) / "bash.sock"


_FULL_ANSWERS = frozenset({"run", "status", "stop"})
"""The tools whose every field the CLI asks for (``full``): it reads them, and ``--json`` prints them."""


def _call(args: argparse.Namespace, tool: str, arguments: dict[str, Any]) -> CallResult | None:
    """The daemon's answer to ``tool``; None (said on stderr) when there is none."""
    from hive.bash import BashError
    from hive.bash.client import connect

    if tool in _FULL_ANSWERS:
        arguments = {**arguments, "full": True}
    try:
        with connect(bash_socket(args)) as client:
            return client.call(tool, arguments)
    except (BashError, OSError) as exc:
        # The daemon unreachable, gone mid-call, or answering nonsense: one line, no traceback.
        print(f"hive: {in_cli_terms(' '.join(str(exc).split()))}", file=sys.stderr)
        return None


def _show(args: argparse.Namespace, result: CallResult) -> None:
    """Print ``result``: the answer on stdout, a tool error on stderr (and as JSON on stdout with --json)."""
    if args.json:
        print(json.dumps(result.structured, indent=2))
    if result.is_error:
        print(f"hive: {for_operator(result)}", file=sys.stderr)
    elif not args.json:
        print(for_operator(result))


def _answer_with_the_tasks_status(args: argparse.Namespace, tool: str, arguments: dict[str, Any]) -> int:
    """Call ``tool`` and exit as its answer says: a final state exits with the task's status."""
    result = _call(args, tool, arguments)
    if result is None:
        return FAILED
    _show(args, result)
    code = exit_status(result)
    if code is None:
        state, exit_code = result.structured.get("state"), result.structured.get("exit_code")
        print(
            f"hive: the daemon answered a state this hive cannot exit with ({state!r}, exit code "
            f"{exit_code!r}); is hive-bash-daemon newer than this hive?",
            file=sys.stderr,
        )
        return FAILED
    return code


def _answer(args: argparse.Namespace, tool: str, arguments: dict[str, Any]) -> int:
    """Call ``tool``: 0 when it did what was asked, else hive's own failure or bad input."""
    result = _call(args, tool, arguments)
    if result is None:
        return FAILED
    _show(args, result)
    return tool_error_status(result) if result.is_error else 0


def _wait(args: argparse.Namespace) -> float:
    seconds, note = capped_wait(args.wait)
    if note is not None:
        print(f"hive: {note}", file=sys.stderr)
    return seconds


def read_command(words: Sequence[str], file: str | None, stdin: BinaryIO | None) -> str:
    """The command ``hive bash run`` runs: its words, ``-`` (``stdin``) or ``--file`` (a
    `hive._text_input.TextRefused` says why not), up to the tools' cap."""
    return read_text(
        words,
        file,
        noun="command",
        cap=MAX_CMD_BYTES,
        longer="put a longer script in a file of its own and run `hive bash run bash FILE`",
        blank="give the shell command to run",
        stdin=stdin,
    )


def _bash_run(args: argparse.Namespace) -> int:
    cmd = read_command(args.cmd, args.file, process_stdin())
    arguments: dict[str, Any] = {"cmd": cmd, "wait_seconds": _wait(args)}
    if args.name is not None:
        arguments["name"] = args.name
    if args.timeout is not None:
        arguments["timeout_secs"] = args.timeout
    if args.notify_on is not None:
        arguments["notify_on"] = args.notify_on
    if args.notify_max is not None:
        arguments["notify_max"] = args.notify_max
    return _answer_with_the_tasks_status(args, "run", arguments)


def _bash_status(args: argparse.Namespace) -> int:
    return _answer_with_the_tasks_status(args, "status", {"id": args.id, "wait_seconds": _wait(args)})


def _bash_stop(args: argparse.Namespace) -> int:
    return _answer(args, "stop", {"id": args.id})


def _bash_ls(args: argparse.Namespace) -> int:
    return _answer(args, "list", {"limit": 0})


def _bash_tail(args: argparse.Namespace) -> int:
    from hive.cli._bash_tail import bash_tail

    return bash_tail(args, _call)
