"""``hive-agent``'s command line: its flags, each with an environment default, and ``--mcp-config``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from hive import __version__, _flags
from hive._state_dir import default_state_dir
from hive.agent._errors import HarnessError
from hive.errors import BadInput
from hive.runtime import STOP_GRACE, CompactionPolicy, Config, HttpServer, McpServer, Permission, StdioServer

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_WATERMARK = CompactionPolicy().watermark
"""``--compact-at`` when neither it nor ``HIVE_COMPACT_AT`` is given."""

HYPERHIVE = "hyperhive"
RESERVED = (HYPERHIVE, "subagent")
"""MCP server names of hive's own that an --mcp-config may not use."""
BASH = "bash"
"""The bash relay's name: an --mcp-config entry of that name gives way to hive's own relay."""

DESCRIPTION = """\
Run one agent: serve its agent socket (wakes from the bash daemon, the operator's prompts and
/compact, status), queue what arrives durably in <state>/queue, and run turns through the runtime
HIVE_RUNTIME names (claude, or any ACP agent: HIVE_ACP_COMMAND, HIVE_ACP_ARGS, HIVE_ACP_ENV).
Everything queued when no turn runs goes into one turn, oldest first, each message marked with
who it is from. Every agent gets the bash tools (the MCP server `bash`, through hive-bash-mcp)
and the hyperhive tools (`compact`, `loose_ends`, served on <state>/hyperhive.sock through
hive-hyperhive-mcp);
on claude the built-in Bash tool is disallowed. Each turn's stream and what it carried go to
<state>/turns.jsonl (`hive agent log` shows it). The session id is kept in <state>/session and
resumed after a restart.

SIGINT or SIGTERM stops it: the running turn is stopped the SIGINT way, the turn log written,
the sockets removed, each daemon it started (--with-bash-daemon, --subagents) sent SIGINT; exit
status 0. A second signal stops waiting for the agent's own end of the turn. Exit status 2: it
could not start (a bad setting, an agent that cannot be started or is refused, a socket or state
directory in use).

A daemon it started that ends is started again after a backoff (0.5 s doubling to 30 s); while it
is down, `hive agent status` says so, and so do the agent's calls to it."""


class OptionsError(HarnessError, BadInput):
    """A flag, environment variable or --mcp-config file is wrong; the message says which and how."""


@attrs.frozen
class Options:
    state_dir: Path
    agent_socket: Path
    bash_socket: Path
    turns: Config = attrs.field(factory=Config)
    """How the agent's turns run, as the flags say: `hive.agent.harness.runtime_config` adds
    hive's own MCP servers (before ``--mcp-config``'s) and what it disallows."""
    with_bash_daemon: bool = False
    subagents: bool = False
    log_level: str = "info"
    name: str = "hive"
    """The agent's name in its telemetry (``invoke_agent <name>``): --name, else the state dir's base name."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hive-agent", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where the queue, the turn log, the session id and (by default) the sockets live "
        "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]",
    )
    add(
        "--agent-socket",
        type=Path,
        metavar="PATH",
        help="the agent socket to serve (0600): where wakes, prompts, /compact and status come "
        "[HIVE_AGENT_SOCKET; default <state-dir>/agent.sock]",
    )
    add(
        "--bash-socket",
        type=Path,
        metavar="PATH",
        help="the bash daemon's socket, which the agent's bash relay connects to "
        "[HIVE_BASH_SOCKET; default <state-dir>/bash.sock]",
    )
    add(
        "--system-prompt",
        metavar="TEXT",
        help="appended to the agent's system prompt (claude: --append-system-prompt) [HIVE_SYSTEM_PROMPT]",
    )
    add("--model", metavar="M", help="the model (claude: an alias such as sonnet, or a full id) [HIVE_MODEL]")
    add(
        "--effort", metavar="E", help="the effort level (claude: low, medium, high, xhigh, max) [HIVE_EFFORT]"
    )
    add(
        "--idle-timeout",
        metavar="S",
        help="stop a turn in which the agent has sent nothing for S seconds (more than 0); the turn is "
        "logged `idle`, its messages count as carried, and the loop goes on [HIVE_IDLE_TIMEOUT; default: "
        "never]",
    )
    add(
        "--stop-grace",
        metavar="S",
        help="after SIGINT to the agent (a stop, the idle timeout), how long to wait for its own end of "
        f"the turn, in seconds (0 or more) [HIVE_STOP_GRACE; default {STOP_GRACE:g}]",
    )
    add(
        "--compact-at",
        metavar="F",
        help="after a turn that leaves the context more than this fraction full (in (0, 1]), run the "
        "checkpoint turn and compact; 'off' for never [HIVE_COMPACT_AT; default "
        f"{DEFAULT_WATERMARK}]",
    )
    add(
        "--mcp-config",
        type=Path,
        metavar="FILE",
        help='more MCP servers for the agent, in the {"mcpServers": {NAME: {...}}} shape claude\'s '
        '--mcp-config reads: stdio entries ({"command", "args", "env"}) and http entries ({"type": '
        '"http", "url", "headers"}); an entry may say "allowedTools": [TOOL, ...] (default: all its '
        "tools allowed). An entry named bash gives way to hive's own relay; hyperhive and subagent are "
        "hive's own names [HIVE_MCP_CONFIG]",
    )
    add(
        "--with-bash-daemon",
        action="store_true",
        default=None,
        help="if no hive-bash-daemon answers on the bash socket, start one as this program's child "
        "on the same state directory (started again after a backoff if it ends; stopped with SIGINT "
        "when this program stops), so one command runs a whole agent [HIVE_WITH_BASH_DAEMON=1]",
    )
    add(
        "--subagents",
        action="store_true",
        default=None,
        help="give the agent subagents: the MCP server `subagent` (hive-subagent-mcp on this state "
        "directory, its turns' ends woken to this agent socket), every tool allowed; the subagent "
        "daemon runs as this program's child, supervised and stopped as --with-bash-daemon's is "
        "[HIVE_SUBAGENTS=1]",
    )
    add(
        "--permission",
        choices=[p.value for p in Permission],
        help="what happens to a tool call the agent would ask about (nobody is there to ask): default "
        "(refused), accept_edits (file edits allowed), allow (everything allowed) [HIVE_PERMISSION; "
        "default: default]",
    )
    add(
        "--name",
        metavar="NAME",
        help="the agent's name in its OpenTelemetry spans and metrics (`invoke_agent NAME`) "
        "[HIVE_AGENT_NAME; default: the state directory's base name]",
    )
    add("--log-level", metavar="LEVEL", help=_flags.LOG_LEVEL_HELP)
    add("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def parse_options(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Options:
    """The options from ``argv`` (a flag wins over its environment variable); OptionsError if wrong."""
    env = os.environ if env is None else env
    args = build_parser().parse_args(argv)

    def pick(flag: str | None, variable: str) -> str | None:
        return flag if flag is not None else _flags.from_environment(variable, str, None, env=env)

    def setting(flag: str | None, name: str, variable: str, read: Callable[[str], T], default: T) -> T:
        if flag is not None:
            return _flags.setting(name, flag, read, OptionsError)
        return _flags.from_environment(variable, read, default, env=env, error=OptionsError)

    def switch(flag: bool | None, variable: str) -> bool:
        return flag if flag is not None else setting(None, "", variable, _flags.yes_no, False)

    state = Path(pick(args.state_dir, "HIVE_STATE_DIR") or default_state_dir(env)).absolute()
    agent_socket = Path(pick(args.agent_socket, "HIVE_AGENT_SOCKET") or state / "agent.sock").absolute()
    bash_socket = Path(pick(args.bash_socket, "HIVE_BASH_SOCKET") or state / "bash.sock").absolute()
    mcp_config = pick(args.mcp_config, "HIVE_MCP_CONFIG")
    servers, allowed = read_mcp_config(Path(mcp_config)) if mcp_config else ((), ())
    chosen = pick(args.permission, "HIVE_PERMISSION") or Permission.DEFAULT.value
    try:
        permission = Permission(chosen)
    except ValueError:
        raise OptionsError(
            f"HIVE_PERMISSION: {chosen!r} is not one of {', '.join(p.value for p in Permission)}"
        ) from None
    return Options(
        name=pick(args.name, "HIVE_AGENT_NAME") or state.name or "hive",
        state_dir=state,
        agent_socket=agent_socket,
        bash_socket=bash_socket,
        turns=Config(
            system_prompt=pick(args.system_prompt, "HIVE_SYSTEM_PROMPT"),
            model=pick(args.model, "HIVE_MODEL"),
            effort=pick(args.effort, "HIVE_EFFORT"),
            idle_timeout=setting(
                args.idle_timeout, "--idle-timeout", "HIVE_IDLE_TIMEOUT", _flags.idle_timeout, None
            ),
            stop_grace=setting(
                args.stop_grace, "--stop-grace", "HIVE_STOP_GRACE", _flags.stop_grace, STOP_GRACE
            ),
            compaction=CompactionPolicy(
                watermark=setting(
                    args.compact_at, "--compact-at", "HIVE_COMPACT_AT", _flags.compact_at, DEFAULT_WATERMARK
                )
            ),
            mcp_servers=servers,
            allowed_tools=allowed,
            permission=permission,
        ),
        with_bash_daemon=switch(args.with_bash_daemon, "HIVE_WITH_BASH_DAEMON"),
        subagents=switch(args.subagents, "HIVE_SUBAGENTS"),
        log_level=(pick(args.log_level, "HIVE_LOG_LEVEL") or "info").lower(),
    )


def read_mcp_config(path: Path) -> tuple[tuple[McpServer, ...], tuple[str, ...]]:
    """The servers of an ``{"mcpServers": {...}}`` file, and the tools allowed by name."""
    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise OptionsError(f"--mcp-config {path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise OptionsError(f"--mcp-config {path}: not JSON ({exc})") from None
    entries = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        raise OptionsError(f'--mcp-config {path}: expected {{"mcpServers": {{NAME: {{...}}, ...}}}}')
    servers: list[McpServer] = []
    allowed: list[str] = []
    for name, entry in entries.items():
        where = f"--mcp-config {path}: server {name!r}"
        if name == BASH:
            log.info("%s: every agent gets hive's own bash relay (on --bash-socket) in its place", where)
            continue
        if name in RESERVED:
            raise OptionsError(
                f"{where}: the name is hive's own (hyperhive: hive-agent's tools; subagent: with "
                "--subagents); rename it"
            )
        if not isinstance(entry, dict):
            raise OptionsError(f"{where}: expected an object")
        tools = entry.get("allowedTools", ["*"])
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise OptionsError(f'{where}: "allowedTools" must be a list of tool names (or ["*"] for all)')
        every = "*" in tools
        if not every:
            allowed += [f"mcp__{name}__{tool}" for tool in tools]
        servers.append(_server(where, name, entry, every))
    return tuple(servers), tuple(allowed)


def _server(where: str, name: str, entry: dict[str, Any], every: bool) -> McpServer:
    kind = entry.get("type", "stdio" if "command" in entry else None)
    if kind == "stdio":
        command, args, env = entry.get("command"), entry.get("args", []), entry.get("env", {})
        if not isinstance(command, str) or not command:
            raise OptionsError(f'{where}: a stdio server needs "command" (a string)')
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise OptionsError(f'{where}: "args" must be a list of strings')
        return StdioServer(name, command, tuple(args), _strings(where, "env", env), allow_all_tools=every)
    if kind == "http":
        url, headers = entry.get("url"), entry.get("headers", {})
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise OptionsError(f'{where}: an http server needs "url" (http:// or https://)')
        return HttpServer(name, url, _strings(where, "headers", headers), allow_all_tools=every)
    if kind is None:
        raise OptionsError(
            f'{where}: says neither "command" (a stdio server) nor "type"; give it "command" (with "args" '
            'and "env" if it needs them), or "type": "http" and a "url"'
        )
    raise OptionsError(
        f'{where}: type {kind!r} is not served; use a stdio entry ("command") or "type": "http" with a "url"'
    )


def _strings(where: str, key: str, value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise OptionsError(f'{where}: "{key}" must be an object of strings')
    return tuple(value.items())


def _program(script: str, module: str) -> tuple[str, list[str]]:
    """How to run one of hive's programs: its script beside this interpreter, else ``-m``."""
    path = Path(sys.executable).with_name(script)
    return (str(path), []) if path.exists() else (sys.executable, ["-m", module])


SUBAGENT_SOCKET = "subagent.sock"
"""The subagent daemon's socket in the state dir (hive-subagent-mcp's default too)."""


def subagent_server(state_dir: Path, agent_socket: Path, outage_file: Path) -> StdioServer:
    """Subagents as the agent's MCP server ``subagent``: hive-subagent-mcp, every tool allowed,
    waking this agent socket when a subagent's turn ends unseen, on the daemon the harness
    supervises at ``<state_dir>/subagent.sock`` (``outage_file``: it starts none of its own)."""
    command, args = _program("hive-subagent-mcp", "hive.subagent.relay")
    return StdioServer(
        "subagent",
        command,
        (
            *args,
            "--state-dir",
            str(state_dir),
            "--socket",
            str(state_dir / SUBAGENT_SOCKET),
            "--outage-file",
            str(outage_file),
        ),
        (("HIVE_AGENT_SOCKET", str(agent_socket)),),
        allow_all_tools=True,
    )


def hyperhive_relay_server(socket: Path) -> StdioServer:
    """The hyperhive tools as the agent's MCP server ``hyperhive``: hive-hyperhive-mcp, relaying to
    the harness's own ``socket``, every tool allowed."""
    command, args = _program("hive-hyperhive-mcp", "hive.agent.hyperhive_mcp")
    return StdioServer(HYPERHIVE, command, (*args, "--socket", str(socket)), allow_all_tools=True)


def relay_server(bash_socket: Path, outage_file: Path | None = None) -> StdioServer:
    """The bash tools as the agent's MCP server ``bash``: hive-bash-mcp, every tool allowed
    (``outage_file``: where the harness says its daemon is down)."""
    command, args = _program("hive-bash-mcp", "hive.bash.relay")
    args += ["--socket", str(bash_socket)]
    if outage_file is not None:
        args += ["--outage-file", str(outage_file)]
    return StdioServer(BASH, command, tuple(args), allow_all_tools=True)
