"""``hive agent``: talk to a running hive-agent over its socket, read its turn log."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hive._state_dir import default_state_dir
from hive.errors import BadInput

if TYPE_CHECKING:
    from hive.wake import AgentReply, AgentRequest


def add_agent_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
