"""``hive agent``: talk to a running hive-agent over its socket, read its turn log.

Every subcommand finds its agent as ``hive-agent`` was told where to be: ``--state-dir`` (or
``HIVE_STATE_DIR``, else ``$XDG_STATE_HOME/hive``, else ``~/.local/state/hive``), and for the
agent socket ``--socket`` (or ``HIVE_AGENT_SOCKET``, else ``<state-dir>/agent.sock``), by the
same rule as ``hive-agent``'s ``--agent-socket``. So the flags and the environment that started
an agent reach it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hive._limits import state_dir_path
from hive._lines import MAX_LINE
from hive._main import take_sigint
from hive._text_input import TextTooLong, process_stdin, read_text
from hive._when import in_seconds
from hive.cli._agent_start import SPAWN_WAIT, STARTING_WAIT, StartWaits
from hive.cli._agent_status import describe_status
from hive.errors import BadInput

if TYPE_CHECKING:
    from hive.agent_socket import AgentReply, AgentRequest

Handler = Callable[[argparse.Namespace], int]


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], help: str) -> None:
    agent = commands.add_parser(
        "agent",
        help=help,
        description="Talk to a running hive-agent over its agent socket (status, prompt, compact), or read "
        "its turn log (log). Each finds the agent where hive-agent was told to be: --state-dir "
        "(HIVE_STATE_DIR), and the socket at --socket (HIVE_AGENT_SOCKET), else <state-dir>/agent.sock.",
    ).add_subparsers(dest="agent_command", required=True, metavar="COMMAND")
    in_state_dir = argparse.ArgumentParser(add_help=False)
    in_state_dir.add_argument("--state-dir", metavar="DIR", help=_state_dir_help())
    over_socket = argparse.ArgumentParser(add_help=False, parents=[in_state_dir])
    over_socket.add_argument(
        "--socket",
        metavar="PATH",
        help="the agent socket, as hive-agent was given it (its --agent-socket) "
        "[HIVE_AGENT_SOCKET; default <state-dir>/agent.sock]",
    )

    def command(
        name: str,
        handler: Handler,
        *,
        over: argparse.ArgumentParser,
        summary: str,
        description: str,
        spawn_wait: float = 0,
    ) -> argparse.ArgumentParser:
        parser = agent.add_parser(name, parents=[over], help=summary, description=description)
        parser.set_defaults(handler=handler, waits=StartWaits(spawn=spawn_wait))
        return parser

    status = command(
        "status",
        _agent_status,
        over=over_socket,
        summary="what the agent does: idle, or which turn runs and since when; the last turn that "
        "ended and how; the session, the queue, context usage",
        description="Ask hive-agent what it is doing: idle, in turn N (since when, carrying how many "
        "messages), compacting, or waiting to retry a turn that could not start; then its session, its "
        "queue, context usage, and the last turn that ended (its number, how it ended, when). A "
        f"hive-agent that is starting (it holds the state directory's lock) is waited for, up to {STARTING_WAIT} "
        "s. Exit status 0 when it answered, 1 when no hive-agent could be asked.",
    )
    status.add_argument(
        "--json", action="store_true", help="print the status as JSON (the agent socket's status object)"
    )

    prompt = command(
        "prompt",
        _agent_prompt,
        over=over_socket,
        summary="send the agent a message (its next turn carries it)",
        description="Send the agent a message; its next turn carries it. The words given are joined with "
        "one space: quote the message to keep its spacing. Linux limits one argument to 128 KiB: a "
        "longer message goes through - (stdin) or --file, up to the agent socket's 1 MiB a request "
        "(JSON escapes counted). An empty or blank message is refused. "
        f"{_WAITS} Exit status 0 once hive-agent has "
        "queued it, 1 when no hive-agent could be asked (or it refused), 2 for a message that cannot "
        "be sent (none, blank, too long, unreadable).",
        spawn_wait=SPAWN_WAIT,
    )
    prompt.add_argument(
        "text",
        nargs="*",
        metavar="TEXT",
        help="the message: its words, joined with one space (quote it to keep its spacing; one "
        "argument is limited to 128 KiB by Linux), or - to read it from stdin",
    )
    prompt.add_argument("--file", metavar="FILE", help="read the message from FILE (up to 1 MiB)")

    command(
        "compact",
        _agent_compact,
        over=over_socket,
        summary="compact the agent's session: at once when idle, else right after the running turn",
        description="Ask hive-agent to compact its agent's session: at once when idle, else right after "
        "the running turn, before the next. "
        f"{_WAITS} Exit status 0 once it has the request, 1 when no hive-agent could be asked.",
        spawn_wait=SPAWN_WAIT,
    )

    log = command(
        "log",
        _agent_log,
        over=in_state_dir,
        summary="the turn log for a person: each turn's trigger, the agent's text, tool calls and "
        "results, errors, tokens and context usage",
        description="Show the turn log (<state-dir>/turns.jsonl) for a person: each turn's header (its "
        "number, when it started, the messages it carried), the agent's text, tool calls and results, "
        "then how it ended (tokens, context usage, errors). --follow shows each turn the same way as it "
        "happens. Exit status 0; 1 when the state directory holds no turn log; 2 when there is no "
        "such state directory. --follow ends with 0 on Ctrl-C.",
    )
    log.add_argument(
        "--follow", "-f", action="store_true", help="show the turns there are, then each as it happens"
    )
    log.add_argument("--json", action="store_true", help="print the log's lines as they are")


_WAITS = (
    f"A hive-agent that is starting is waited for: up to {in_seconds(SPAWN_WAIT)} for it to take the state "
    f"directory's lock (it does once its imports are done), then up to {in_seconds(STARTING_WAIT)} for its socket."
)


def _state_dir_help() -> str:
    now = state_dir_path().replace("%", "%%")
    return (
        "the agent's state directory, as hive-agent was given it [HIVE_STATE_DIR; default "
        f"$XDG_STATE_HOME/hive, else ~/.local/state/hive: here {now}]"
    )


def _state_dir(args: argparse.Namespace) -> Path:
    given: str | None = args.state_dir
    return Path(given or state_dir_path())


def _agent_socket(args: argparse.Namespace) -> Path:
    """``--socket``, else ``HIVE_AGENT_SOCKET``, else ``<state-dir>/agent.sock`` (hive-agent's rule)."""
    return Path(args.socket or os.environ.get("HIVE_AGENT_SOCKET") or _state_dir(args) / "agent.sock")


def _ask_agent(args: argparse.Namespace, request: AgentRequest) -> AgentReply | None:
    """One request over the agent socket, once a hive-agent that is starting serves it
    (`hive.cli._agent_start`, waiting as long as ``args.waits`` says); None (said on stderr) when
    it cannot be asked."""
    import trio

    from hive.agent_socket import AgentRequestError, open_agent_connection
    from hive.cli._agent_start import wait_started

    path = _agent_socket(args)
    starting: list[int | None] = []

    async def ask() -> AgentReply:
        try:
            return await ask_once()
        except (FileNotFoundError, ConnectionRefusedError):
            starting.append(await wait_started(path, _state_dir(args), args.waits))
            return await ask_once()

    async def ask_once() -> AgentReply:
        with trio.fail_after(30):
            async with open_agent_connection(path) as connection:
                return await connection.request(request)

    try:
        reply = trio.run(ask)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        if starting and (pid := starting[0]) is not None:
            print(
                f"hive: hive-agent (pid {pid}) holds {_state_dir(args)} but did not serve {path} within "
                f"{in_seconds(args.waits.starting)} of being asked (is its --agent-socket elsewhere? give it with --socket)",
                file=sys.stderr,
            )
        elif isinstance(exc, FileNotFoundError):
            print(
                f"hive: no agent socket at {path} (is hive-agent running there? give its --state-dir, "
                "or its socket with --socket)",
                file=sys.stderr,
            )
        else:
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


def _agent_status(args: argparse.Namespace) -> int:
    from hive.agent_socket import Status, converter

    reply = _ask_agent(args, Status())
    if reply is None or reply.status is None:
        return 1
    if args.json:
        print(json.dumps(converter.unstructure(reply.status), indent=2))
    else:
        print("\n".join(describe_status(reply.status, time.time())))
    return 0


# -- hive agent prompt -------------------------------------------------------------------------------


class PromptTooLong(TextTooLong):
    """The message does not fit in one request on the agent socket."""


def prompt_text(words: list[str], file: str | None) -> str:
    """The message ``hive agent prompt WORDS`` (``-``: stdin) or ``--file FILE`` gives
    (`hive._text_input.read_text`: a `TextRefused` says why not)."""
    return read_text(
        words,
        file,
        noun="message",
        cap=MAX_LINE,
        longer=_LONGER,
        blank="nothing was sent; give the agent words",
        stdin=process_stdin(),
    )


_LONGER = "put the text in a file the agent can read and send a message that names the file"


def _too_long(size: int) -> PromptTooLong:
    return PromptTooLong(
        f"the message is too long: its request to the agent socket would be {size:,} bytes, and the "
        f"socket takes at most {MAX_LINE:,} bytes (1 MiB) a request, JSON escapes counted; {_LONGER}"
    )


def _agent_prompt(args: argparse.Namespace) -> int:
    text = prompt_text(args.text, args.file)
    from hive.agent_socket import Prompt, encode

    request = Prompt(text)
    if (size := len(encode(request)) - 1) > MAX_LINE:  # the newline is not counted
        raise _too_long(size)
    if _ask_agent(args, request) is None:
        return 1
    print("queued: the agent's next turn carries it")
    return 0


def _agent_compact(args: argparse.Namespace) -> int:
    from hive.agent_socket import Compact

    if _ask_agent(args, Compact()) is None:
        return 1
    print("compaction asked for: at once if the agent is idle, else right after its turn")
    return 0


# -- hive agent log ----------------------------------------------------------------------------------


class NoStateDir(BadInput):
    """``hive agent log`` was given (or defaulted to) a state directory that is not one."""


def _log_path(state_dir: Path) -> Path:
    """The turn log of ``state_dir``; NoStateDir if it is no directory."""
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
    from hive._files import read_regular

    path = _log_path(_state_dir(args))
    data = read_regular(path)
    if args.follow:
        import trio

        take_sigint()
        try:
            if not data:
                print(f"hive: no turn in {path} yet; waiting for the first (Ctrl-C to stop)", file=sys.stderr)
            trio.run(_follow_log, path, args.json)
        except KeyboardInterrupt:
            return 0
        return 0
    if data is None:
        print(
            f"hive: no turn log at {path}: no hive-agent has run on this state directory (give the "
            "agent's own with --state-dir)",
            file=sys.stderr,
        )
        return 1
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        print(f"hive: the turn log {path} is empty: no turn has started yet", file=sys.stderr)
        return 0
    if args.json:
        sys.stdout.write("".join(line.decode(errors="replace") + "\n" for line in lines))
        return 0
    from hive.agent import render_log

    for text in render_log(_objects(lines)):
        print(text)
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

    from hive._follow import follow_lines
    from hive.agent import LogRenderer

    renderer = LogRenderer()
    async with aclosing(follow_lines(path)) as lines:
        async for line in lines:
            if not line.strip():
                continue
            if raw:
                print(line.decode(errors="replace"), flush=True)
                continue
            for obj in _objects([line]):
                for text in renderer.feed(obj):
                    print(text, flush=True)
