"""``hive-bash-mcp`` and ``hive-hyperhive-mcp``: the kit's relay (:mod:`hive.daemon.relay`) in
front of the bash daemon's socket, and of the hyperhive tools' that hive-agent serves. Neither
form starts a server.
"""

from __future__ import annotations

import os
import sys

from hive._flags import positive_seconds
from hive._limits import MAX_WAIT, state_dir_path
from hive._when import in_seconds
from hive.daemon.relay import REPLY_MARGIN, REPLY_TIMEOUT, Relay, Relayed, relay_main, relay_parser

REPLY_TIMEOUT_ENV = "HIVE_BASH_RELAY_REPLY_TIMEOUT"

BASH = Relayed(
    program="hive-bash-mcp",
    server="bash",
    tools=("run", "status", "stop", "list"),
    what="the bash daemon",
    server_program="hive-bash-daemon",
    summary="Background shell execution: `run` starts a command, `status` checks on or waits for a task, "
    "`stop` ends one, `list` shows them all.",
    absent_hint="Start it with `hive-bash-daemon`, or point HIVE_BASH_SOCKET (or --socket) at its socket.",
    timeout_hint=f"longer than any call may ask it to wait ({in_seconds(MAX_WAIT)}): it may be wedged (see "
    "its log, or restart hive-bash-daemon)",
    lost_hint="`list` shows the tasks once it is back",
)
HYPERHIVE = Relayed(
    program="hive-hyperhive-mcp",
    server="hyperhive",
    tools=("loose_ends", "compact"),
    what="hive-agent's hyperhive server",
    server_program="hive-agent",
    summary="The harness's own tools: `loose_ends` lists the background bash tasks whose end you have not "
    "been told yet; `compact` compacts your conversation once this turn ends.",
    absent_hint="hive-agent, the harness that serves them, is not running (it may be restarting): nothing was "
    "done; call again once it is back.",
    timeout_hint="it may be wedged (see hive-agent's log)",
    lost_hint="hive-agent stopped; call again once it is back",
)
TOOL_NAMES = BASH.tools


def default_socket() -> str:
    return os.environ.get("HIVE_BASH_SOCKET") or os.path.join(state_dir_path(), "bash.sock")


DESCRIPTION = """\
An MCP stdio server for background bash (run, status, stop, list), relayed to hive-bash-daemon's
Unix socket. Spawn it from an MCP client (e.g. claude's --mcp-config); it holds no state of its own.

It answers at once, daemon or not. It connects when the first request comes; with no daemon it
answers initialize itself, lists the four tools, and answers each call with a tool error naming
the socket and why it cannot be reached. Each later request tries again: once the daemon is back
the relay replays the client's initialize to it and relays from there, with no new relay needed.
A request the daemon leaves unanswered for the reply timeout gets a JSON-RPC error (-32001); a
daemon that refuses this relay's uid makes every request a JSON-RPC error (-32003) saying why.
Under a TRACEPARENT, a tools/call naming no span of its own is sent in that one (_meta.traceparent).

Exit status, once stdin ends and every relayed request is answered: 0 if connected to the daemon
(or no request needed it), 1 if the daemon was unreachable, went away or refused the relay."""


HYPERHIVE_SOCKET = "hyperhive.sock"
"""The hyperhive server's socket in hive-agent's state directory."""

HYPERHIVE_DESCRIPTION = """\
An MCP stdio server for the hyperhive tools (loose_ends, compact), relayed to the Unix socket
hive-agent serves them on (<state>/hyperhive.sock). hive-agent gives it to its agent; it holds no
state of its own and starts nothing.

It answers at once, hive-agent or not: while hive-agent is down (stopped, or restarting), it
answers initialize itself, lists the two tools, and answers each call with a tool error saying
so; each later request tries again, and once hive-agent is back the relay replays the client's
initialize to it and relays from there. A request left unanswered for the reply timeout gets a
JSON-RPC error (-32001); a server that refuses this relay's uid makes every request a JSON-RPC
error (-32003) saying why.

Exit status, once stdin ends and every relayed request is answered: 0 if connected to hive-agent
(or no request needed it), 1 if it was unreachable, went away or refused the relay."""


def main(argv: list[str] | None = None) -> int:
    """``hive-bash-mcp``: the relay to the bash daemon."""
    parser = relay_parser(BASH, DESCRIPTION)
    parser.add_argument(
        "--socket",
        default=None,
        help="the daemon's socket [HIVE_BASH_SOCKET; default <state>/bash.sock, where <state> is "
        "HIVE_STATE_DIR, else $XDG_STATE_HOME/hive, else ~/.local/state/hive]",
    )
    parser.add_argument(
        "--reply-timeout",
        type=positive_seconds,
        default=os.environ.get(REPLY_TIMEOUT_ENV) or str(REPLY_TIMEOUT),
        metavar="SECONDS",
        help="answer a request with an error if the daemon has not answered it in this long "
        f"[{REPLY_TIMEOUT_ENV}; default {REPLY_TIMEOUT:g}: the longest wait a call may ask for, "
        f"{in_seconds(MAX_WAIT)}, plus {in_seconds(REPLY_MARGIN)}]",
    )
    parser.add_argument(
        "--outage-file",
        default=None,
        metavar="FILE",
        help="where hive-agent, which supervises the daemon (--with-bash-daemon), says it is down: "
        "while FILE is there, a call the daemon cannot answer gets FILE's words as its error",
    )

    return relay_main(
        parser,
        argv,
        lambda args: Relay(
            args.socket or default_socket(),
            args.reply_timeout,
            os.environ.get("TRACEPARENT"),
            args.outage_file,
            relayed=BASH,
        ),
    )


def hyperhive_main(argv: list[str] | None = None) -> int:
    """``hive-hyperhive-mcp``: the relay to hive-agent's hyperhive tools."""
    parser = relay_parser(HYPERHIVE, HYPERHIVE_DESCRIPTION)
    parser.add_argument(
        "--socket",
        default=None,
        help=f"hive-agent's hyperhive socket [default <state>/{HYPERHIVE_SOCKET}, where <state> is "
        "HIVE_STATE_DIR, else $XDG_STATE_HOME/hive, else ~/.local/state/hive]",
    )
    parser.add_argument(
        "--reply-timeout",
        type=positive_seconds,
        default=str(REPLY_TIMEOUT),
        metavar="SECONDS",
        help=f"answer a request with an error if hive-agent has not answered it in this long [default "
        f"{REPLY_TIMEOUT:g}]",
    )

    return relay_main(
        parser,
        argv,
        lambda args: Relay(
            args.socket or os.path.join(state_dir_path(), HYPERHIVE_SOCKET),
            args.reply_timeout,
            relayed=HYPERHIVE,
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
