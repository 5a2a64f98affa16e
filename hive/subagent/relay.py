"""``hive-subagent-mcp``: the kit's relay (:mod:`hive.daemon.relay`) in front of the subagent
daemon, which serves the tools (``start``, ``continue``, ``status``, ``interrupt``) on
``<state>/subagent.sock`` and holds the sessions, which outlive this per-turn process.

It starts the daemon on first use (unless ``--outage-file`` says the daemon is hive-agent's),
and says who calls once per connection, in the ``_meta`` of the ``initialize`` it relays: its
working directory and environment (where the subagent's agent runs, and which runtime
``HIVE_RUNTIME`` and ``HIVE_ACP_*`` name), its ``HIVE_AGENT_SOCKET`` (where the ends of the
turns it starts are told, as wakes from ``subagent-<name>``) and its flags.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from functools import partial

from hive._flags import positive_seconds
from hive._limits import state_dir_path
from hive.daemon.relay import REPLY_TIMEOUT, Relay, Relayed, relay_main, relay_parser
from hive.subagent._start import start_daemon

PERMISSIONS = ("default", "accept_edits", "allow")
SOCKET = "subagent.sock"

SUBAGENT = Relayed(
    program="hive-subagent-mcp",
    server="subagent",
    tools=("start", "continue", "status", "interrupt"),
    what="the subagent daemon",
    server_program="python -m hive.subagent.daemon",
    summary="Subagents: `start` starts an agent session working in the background, `continue` gives it "
    "another turn, `status` checks on or waits for them, `interrupt` stops a turn.",
    absent_hint="Nothing was done; call again (a call tries to reach it again).",
    timeout_hint="it may be wedged (see its log, <state>/subagent-daemon.log)",
    lost_hint="status shows the sessions once it is back",
)

DESCRIPTION = """\
An MCP stdio server for subagents: start, continue, status and interrupt agent sessions that work
in the background, each turn through hive's runtime (claude, or an ACP agent). Spawn it from an MCP
client (e.g. claude's --mcp-config); the sessions live in the subagent daemon, which it starts on
first use on <state>/subagent.sock and which outlives it. It relays the client's MCP to the
daemon's socket and holds no state of its own.

A subagent's agent runs in this server's working directory and environment: HIVE_RUNTIME (claude
or acp; start's `runtime` overrides it), HIVE_CLAUDE_COMMAND, HIVE_ACP_COMMAND, HIVE_ACP_ARGS and
HIVE_ACP_ENV choose it as they do for `hive run`. When a turn ends and no status call was waiting
for it, a wake from subagent-<name> goes to HIVE_AGENT_SOCKET (none without it).

Interrupting a turn sends its agent SIGINT (an ACP agent session/cancel first); nothing more
forceful is ever sent."""


def caller_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the subagents' agents run in: this one, without CLAUDECODE (a subagent is
    not nested inside its caller's Claude Code) and NOTIFY_SOCKET (not a service of its own)."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in ("CLAUDECODE", "NOTIFY_SOCKET")}


def build_parser() -> argparse.ArgumentParser:
    parser = relay_parser(SUBAGENT, DESCRIPTION)
    parser.add_argument(
        "--state-dir",
        help="where the daemon keeps sessions (subagents/<name>.json and .jsonl) "
        "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]",
    )
    parser.add_argument(
        "--socket",
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
        metavar="FILE",
        help="the daemon is hive-agent's (--subagents), which supervises it: start none on first use, "
        "and while FILE (where hive-agent says the daemon is down) is there, a call the daemon cannot "
        "answer gets FILE's words as its error",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``hive-subagent-mcp``: the relay to the subagent daemon."""
    parser = build_parser()
    return relay_main(parser, argv, partial(_relay, parser))


def _relay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Relay:
    if args.permission not in PERMISSIONS:
        parser.error(f"HIVE_SUBAGENT_PERMISSION: {args.permission!r} is not one of {', '.join(PERMISSIONS)}")
    idle = args.idle_timeout
    if idle is None and os.environ.get("HIVE_SUBAGENT_IDLE_TIMEOUT"):
        try:
            idle = positive_seconds(os.environ["HIVE_SUBAGENT_IDLE_TIMEOUT"])
        except argparse.ArgumentTypeError as exc:
            parser.error(f"HIVE_SUBAGENT_IDLE_TIMEOUT: {exc}")
    state_dir = os.path.abspath(args.state_dir or state_dir_path())
    socket = os.path.abspath(
        args.socket or os.environ.get("HIVE_SUBAGENT_SOCKET") or os.path.join(state_dir, SOCKET)
    )
    # The daemon's Caller, field by field (hive.subagent._caller; its converter checks it there).
    caller = {
        "cwd": os.getcwd(),
        "env": caller_environment(),
        "agent_socket": os.environ.get("HIVE_AGENT_SOCKET") or None,
        "permission": args.permission,
        "idle_timeout": idle,
    }
    outage = os.path.abspath(args.outage_file) if args.outage_file else None
    return Relay(
        socket,
        REPLY_TIMEOUT,
        outage_file=outage,
        relayed=SUBAGENT,
        start=None if outage else partial(start_daemon, state_dir, socket),
        caller=caller,
    )


if __name__ == "__main__":
    sys.exit(main())
