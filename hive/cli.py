"""``hive``: the operator's command line over hive's services."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hive import __version__
from hive._limits import MAX_NAME, MAX_WAIT, NAME_RULE, is_name
from hive._main import run_main
from hive._state_dir import default_state_dir
from hive.errors import BadInput

if TYPE_CHECKING:
    from hive.bash.client import CallResult
    from hive.wake import AgentReply, AgentRequest


def _socket_help() -> str:
    return "the daemon's socket [HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` about to be parsed, only what it needs is imported."""
    parser = argparse.ArgumentParser(
        prog="hive", description="Operate hive: background bash tasks, agents, the demo."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run hive-agent with a scripted demo agent on a temporary state directory (no API key)",
        description="Run hive-agent (with its own hive-bash-daemon) on a temporary state directory, its agent "
        "a scripted ACP agent shipped with hive (no model, no API key). One operator message starts a turn in "
        "which the agent starts a background task through the bash relay and calls loose_ends over HTTP; the "
        "task's end wakes the next turn. Then hive-agent is stopped with SIGINT, the turn log is printed as "
        "`hive agent log` shows it, and the directory is removed.",
    )
    demo.add_argument(
        "--within",
        type=_demo_within,
        default=None,
        metavar="S",
        help="how long to wait for hive-agent to be ready and end its two turns, in all (default 120)",
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
        help=f"a memorable id for the task (letters, digits, '.', '_', '-'; up to {MAX_NAME})",
    )
    run.add_argument(
        "--timeout", type=_timeout, metavar="S", help="stop the task after S seconds (timed_out)"
    )
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

    _add_agent_commands(commands)
    return parser


def _add_agent_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = commands.add_parser(
        "agent", help="talk to a running hive-agent, read its turn log"
    ).add_subparsers(dest="agent_command", required=True, metavar="COMMAND")
    over_socket = argparse.ArgumentParser(add_help=False)
    over_socket.add_argument(
        "--socket",
        help="the agent socket [HIVE_AGENT_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/agent.sock]",
    )
    status = agent.add_parser(
        "status",
        parents=[over_socket],
        help="idle or in a turn, the session, the queue, context usage, how the last turn ended",
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_agent_status)
    prompt = agent.add_parser(
        "prompt", parents=[over_socket], help="send the agent a message (it is carried by its next turn)"
    )
    prompt.add_argument("text", metavar="TEXT")
    prompt.set_defaults(handler=_agent_prompt)
    compact = agent.add_parser(
        "compact",
        parents=[over_socket],
        help="compact the agent's session: at once when idle, else right after the running turn",
    )
    compact.set_defaults(handler=_agent_compact)
    log = agent.add_parser(
        "log",
        help="the turn log for a person: each turn's trigger, the agent's text, tool calls and results, "
        "errors, tokens and context usage",
    )
    log.add_argument(
        "--state-dir", help="the agent's state directory [HIVE_STATE_DIR; default ~/.local/state/hive]"
    )
    log.add_argument("--follow", "-f", action="store_true", help="keep printing turns as they come")
    log.add_argument("--json", action="store_true", help="print the log's lines as they are")
    log.set_defaults(handler=_agent_log)


def _run_turn(args: argparse.Namespace) -> int:
    from hive.turn import run_turn

    return run_turn(args)


def _demo(args: argparse.Namespace) -> int:
    from hive.demo import run_demo

    return run_demo() if args.within is None else run_demo(within=args.within)


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


def _seconds(refusal: Callable[[float], str | None]) -> Callable[[str], float]:
    """A flag's type: a number of seconds, refused with ``refusal(value)`` where that says why."""

    def seconds(text: str) -> float:
        value = _number(text)
        why = refusal(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{text!r} {why}")
        return value

    return seconds


_wait = _seconds(lambda value: f"is negative; give 0 (answer at once) to {MAX_WAIT:g}" if value < 0 else None)
_timeout = _seconds(
    lambda value: "must be more than 0 seconds; leave --timeout out for none" if value <= 0 else None
)
_demo_within = _seconds(
    lambda value: "is negative; give the seconds the demo may take" if value < 0 else None
)


def _add_wait(command: argparse.ArgumentParser, *, default: float) -> None:
    """Give ``command`` the flag ``--wait S`` (the tool's ``wait_seconds``), ``default`` when left out."""
    shown = f"; default {default:g}" if default else ""
    command.add_argument(
        "--wait",
        type=_wait,
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


# -- hive agent ------------------------------------------------------------------------------------


def _state_dir(given: str | None = None) -> Path:
    return Path(given) if given else default_state_dir()


def _agent_socket(args: argparse.Namespace) -> Path:
    return Path(args.socket or os.environ.get("HIVE_AGENT_SOCKET") or _state_dir() / "agent.sock")


def _ask_agent(args: argparse.Namespace, request: AgentRequest) -> AgentReply | None:
    """One request over the agent socket; None (said on stderr) when it cannot be asked."""
    import trio

    from hive.wake import AgentRequestError, open_agent_connection

    path = _agent_socket(args)

    async def ask() -> AgentReply:
        with trio.fail_after(30):
            async with open_agent_connection(path) as connection:
                return await connection.request(request)

    try:
        reply = trio.run(ask)
    except FileNotFoundError:
        print(
            f"hive: no agent socket at {path} (is hive-agent running? --socket names another)",
            file=sys.stderr,
        )
        return None
    except ConnectionRefusedError:
        print(f"hive: nothing listens on {path}: hive-agent is not running", file=sys.stderr)
        return None
    except trio.TooSlowError:
        print(f"hive: the agent socket {path} did not answer within 30 s", file=sys.stderr)
        return None
    except (OSError, AgentRequestError) as exc:
        print(f"hive: the agent socket {path}: {exc}", file=sys.stderr)
        return None
    if not reply.ok:
        print(f"hive: the agent refused: {reply.error}", file=sys.stderr)
        return None
    return reply


_DOING = {
    "idle": "idle",
    "turn": "in a turn",
    "compacting": "compacting its session",
    "retrying": "waiting to retry a turn that could not start",
}


def _agent_status(args: argparse.Namespace) -> int:
    from hive.wake import Status, converter

    reply = _ask_agent(args, Status())
    if reply is None or reply.status is None:
        return 1
    status = reply.status
    if args.json:
        print(json.dumps(converter.unstructure(status), indent=2))
        return 0
    doing = _DOING.get(status.state, status.state)
    if status.state == "turn":
        doing += f" (carrying {status.carrying} message{'s' if status.carrying != 1 else ''})"
    lines = [f"agent: {doing}", f"session: {status.session_id or '(none yet)'}"]
    lines.append(f"queue: {status.queue} message{'s' if status.queue != 1 else ''} waiting for a turn")
    if status.compact_pending:
        lines.append("compaction: asked for; it runs when the running turn ends")
    if status.context_used is not None:
        size = status.context_size
        of = f" of {size:,} ({status.context_used / size:.0%})" if size else ""
        lines.append(f"context: {status.context_used:,} tokens{of}")
    if status.turns:
        lines.append(f"last turn: {status.turns}, {status.last_stop_reason or '?'}")
    if status.last_error:
        lines.append(f"last error: {status.last_error}")
    print("\n".join(lines))
    return 0


def _agent_prompt(args: argparse.Namespace) -> int:
    from hive.wake import Prompt

    if _ask_agent(args, Prompt(args.text)) is None:
        return 1
    print("queued: the agent's next turn carries it")
    return 0


def _agent_compact(args: argparse.Namespace) -> int:
    from hive.wake import Compact

    if _ask_agent(args, Compact()) is None:
        return 1
    print("compaction asked for: at once if the agent is idle, else right after its turn")
    return 0


class NoStateDir(BadInput):
    """``hive agent log`` was given (or defaulted to) a state directory that is not one."""


def _log_path(given: str | None) -> Path:
    """The turn log of the state directory ``--state-dir`` names; NoStateDir if it is no directory."""
    state_dir = _state_dir(given)
    if not state_dir.exists():
        raise NoStateDir(
            f"no state directory at {state_dir}: give the agent's own with --state-dir (or HIVE_STATE_DIR)"
        )
    if not state_dir.is_dir():
        raise NoStateDir(
            f"{state_dir} is not a directory: --state-dir (or HIVE_STATE_DIR) must name the agent's "
            "state directory"
        )
    return state_dir / "turns.jsonl"


def _agent_log(args: argparse.Namespace) -> int:
    path = _log_path(args.state_dir)
    if not args.follow:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            print(f"hive: no turn log at {path} (no turn yet, or --state-dir names another)", file=sys.stderr)
            return 1
        lines = [line for line in data.split(b"\n") if line.strip()]
        if args.json:
            sys.stdout.write("".join(line.decode(errors="replace") + "\n" for line in lines))
            return 0
        from hive.agent import render_log

        for text in render_log(_objects(lines)):
            print(text)
        return 0
    import trio

    try:
        trio.run(_follow_log, path, args.json)
    except KeyboardInterrupt:
        return 0
    return 0


def _objects(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


async def _follow_log(path: Path, raw: bool) -> None:
    from contextlib import aclosing

    from hive.agent import follow_lines, render_live

    started = False
    async with aclosing(follow_lines(path)) as lines:
        async for line in lines:
            if raw:
                print(line.decode(errors="replace"), flush=True)
                continue
            for obj in _objects([line]):
                for text in render_live(obj, started):
                    print(text, flush=True)
                started = obj.get("type") != "hive"


def main(argv: Sequence[str] | None = None) -> int:
    """``hive ARGV`` (default: the process's arguments): its exit status (README, "Exit status")."""
    return run_main("hive", lambda: _command(sys.argv[1:] if argv is None else list(argv)), interrupted=130)


def _command(argv: list[str]) -> int:
    args = build_parser(_command_of(argv)).parse_args(argv)
    code: int = args.handler(args)
    return code


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (the top level takes no option with a value), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


if __name__ == "__main__":
    sys.exit(main())
