"""``hive-subagent-mcp``: the MCP stdio server of the subagent tools (``start``, ``continue``,
``status``, ``interrupt``).

An MCP client (the parent agent) spawns it per turn; the sessions outlive it in the subagent
daemon, which it connects to on ``<state>/subagent.sock`` or starts there on first use. Each
tool call goes to the daemon with who calls: this process's working directory and
environment (where the subagent's agent runs, and which runtime ``HIVE_RUNTIME`` and
``HIVE_ACP_*`` name), and ``HIVE_AGENT_SOCKET`` (where the ends of the turns it starts are
told, as wakes from ``subagent-<name>``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp.server import Server

from hive import __version__
from hive._flags import positive_seconds
from hive._main import run_main
from hive._mcp import tool_result, tool_server
from hive._outage import read_outage
from hive._state_dir import default_state_dir
from hive.subagent import _client
from hive.subagent._errors import DaemonUnavailable
from hive.subagent._specs import INSTRUCTIONS, TOOLS
from hive.subagent._stdio import Receipts, process_stdio, stdio_streams
from hive.subagent._store import Store
from hive.subagent._wire import Call, Caller

PERMISSIONS = ("default", "accept_edits", "allow")


def caller_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the subagents' agents run in: this one, without CLAUDECODE (a subagent is
    not nested inside its caller's Claude Code) and NOTIFY_SOCKET (not a service of its own)."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in ("CLAUDECODE", "NOTIFY_SOCKET")}


def make_server(
    state_dir: Path,
    socket: Path,
    caller: Caller,
    receipts: Receipts | None = None,
    outage_file: Path | None = None,
) -> Server[Any]:
    """The MCP server of the tools, each call sent to the daemon. An answer that shows turn ends
    tells them only once ``receipts`` reports it written to a client still there (without
    ``receipts``, never: the ends are then told by wakes). With ``outage_file`` the daemon is
    hive-agent's to start: none is started here, and while that file is there a call the daemon
    cannot answer gets its words (``hive._outage``)."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = Call(params.name, dict(params.arguments or {}), caller)
        try:
            reply = await _client.request(state_dir, socket, call, start=outage_file is None)
        except DaemonUnavailable as exc:
            text = read_outage(outage_file) or str(exc)
            return tool_result(text, {"message": text, "error": "DaemonUnavailable"}, is_error=True)
        answer = reply.answer
        if answer.confirm:
            # The ends it shows are told only if this answer reaches a client still there.
            if receipts is None or ctx.request_id is None:
                await reply.confirm(False)
            else:
                receipts.expect(ctx.request_id, reply.confirm)
        return tool_result(answer.text, answer.structured, is_error=answer.is_error)

    return tool_server("subagent", instructions=INSTRUCTIONS, tools=TOOLS, call_tool=call_tool)


async def serve_stdio(state_dir: Path, socket: Path, caller: Caller, outage_file: Path | None = None) -> None:
    """Serve the tools on this process's stdin and stdout until the client goes away."""
    receipts = Receipts()
    server = make_server(state_dir, socket, caller, receipts, outage_file)
    async with process_stdio() as (stdin, stdout), stdio_streams(stdin, stdout, receipts) as (read, write):
        await server.run(read, write, server.create_initialization_options())


DESCRIPTION = """\
An MCP stdio server for subagents: start, continue, status and interrupt agent sessions that work
in the background, each turn through hive's runtime (claude, or an ACP agent). Spawn it from an MCP
client (e.g. claude's --mcp-config); the sessions live in the subagent daemon, which it starts on
first use on <state>/subagent.sock and which outlives it.

A subagent's agent runs in this server's working directory and environment: HIVE_RUNTIME (claude
or acp; start's `runtime` overrides it), HIVE_CLAUDE_COMMAND, HIVE_ACP_COMMAND, HIVE_ACP_ARGS and
HIVE_ACP_ENV choose it as they do for `hive run`. When a turn ends and no status call was waiting
for it, a wake from subagent-<name> goes to HIVE_AGENT_SOCKET (none without it).

Interrupting a turn sends its agent SIGINT (an ACP agent session/cancel first); nothing more
forceful is ever sent."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hive-subagent-mcp",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="where the daemon keeps sessions (subagents/<name>.json and .jsonl) "
        "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]",
    )
    parser.add_argument(
        "--socket",
        type=Path,
        help="the daemon's socket [HIVE_SUBAGENT_SOCKET; default <state-dir>/subagent.sock]",
    )
    parser.add_argument(
        "--permission",
        choices=PERMISSIONS,
        default=os.environ.get("HIVE_SUBAGENT_PERMISSION") or "default",
        help="what happens to a tool call a subagent would ask about (nobody is there to ask): default "
        "(its own settings decide; what it asks about is refused), accept_edits, allow "
        "[HIVE_SUBAGENT_PERMISSION; default default]",
    )
    parser.add_argument(
        "--idle-timeout",
        type=positive_seconds,
        default=None,
        metavar="S",
        help="stop a subagent's turn when its agent sends nothing for S seconds "
        "[HIVE_SUBAGENT_IDLE_TIMEOUT; default: never]",
    )
    parser.add_argument(
        "--outage-file",
        type=Path,
        metavar="FILE",
        help="the daemon is hive-agent's (--subagents), which supervises it: start none on first use, "
        "and while FILE (where hive-agent says the daemon is down) is there, a call the daemon cannot "
        "answer gets FILE's words as its error",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``hive-subagent-mcp``: serve MCP on stdio until it ends; the exit status (README, "Exit status")."""
    return run_main("hive-subagent-mcp", partial(_run, argv), interrupted=130)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.permission not in PERMISSIONS:
        parser.error(f"HIVE_SUBAGENT_PERMISSION: {args.permission!r} is not one of {', '.join(PERMISSIONS)}")
    idle = args.idle_timeout
    if idle is None and os.environ.get("HIVE_SUBAGENT_IDLE_TIMEOUT"):
        try:
            idle = positive_seconds(os.environ["HIVE_SUBAGENT_IDLE_TIMEOUT"])
        except argparse.ArgumentTypeError as exc:
            parser.error(f"HIVE_SUBAGENT_IDLE_TIMEOUT: {exc}")
    state_dir = (args.state_dir or default_state_dir()).absolute()
    env_socket = os.environ.get("HIVE_SUBAGENT_SOCKET")
    socket = (args.socket or (Path(env_socket) if env_socket else Store(state_dir).socket)).absolute()
    caller = Caller(
        cwd=os.getcwd(),
        env=caller_environment(),
        agent_socket=os.environ.get("HIVE_AGENT_SOCKET") or None,
        permission=args.permission,
        idle_timeout=idle,
    )
    outage_file = args.outage_file.absolute() if args.outage_file else None
    trio.run(serve_stdio, state_dir, socket, caller, outage_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
