"""The command line, stdin and environment of one `claude --print` turn.

Neither the prompt nor the MCP servers' configuration is on the command line, which any local
user can read (``ps``, ``/proc/<pid>/cmdline``): the prompt goes to claude's stdin, which is then
closed, and the configuration (the hyperhive token is in its headers) to a 0600 file in the
state directory, whose path is given with ``--mcp-config``.

``hive run`` builds its command with this module before it spawns claude: what only a turn with
MCP servers needs (``tempfile``, ``hive._files`` and its ``logging``, ~5 ms) is imported there.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path

from hive.runtime import (
    AgentCommand,
    Config,
    HttpServer,
    Permission,
    RuntimeSpec,
    StdioServer,
    added_environment,
)

BASE_FLAGS = ("--print", "--input-format", "text", "--output-format", "stream-json", "--verbose")
"""With no prompt argument, ``--print`` in text input mode reads its prompt from stdin to EOF."""
MCP_CONFIG_FILE = "claude-mcp.json"
PERMISSION_MODES = {
    Permission.DEFAULT: None,
    Permission.ACCEPT_EDITS: "acceptEdits",
    Permission.ALLOW: "bypassPermissions",
}
"""claude's ``--permission-mode`` for each policy (in ``--print`` nobody is asked: what the
mode does not allow is refused)."""


def mcp_config(config: Config) -> str:
    """``--mcp-config``'s JSON for the configured servers."""
    servers: dict[str, dict[str, object]] = {}
    for server in config.mcp_servers:
        if isinstance(server, StdioServer):
            servers[server.name] = {
                "type": "stdio",
                "command": server.command,
                "args": list(server.args),
                "env": dict(server.env),
            }
        elif isinstance(server, HttpServer):
            servers[server.name] = {"type": "http", "url": server.url, "headers": dict(server.headers)}
    return json.dumps({"mcpServers": servers}, separators=(",", ":"))


def allowed_tools(config: Config) -> list[str]:
    allowed = list(config.allowed_tools)
    allowed += [f"mcp__{s.name}" for s in config.mcp_servers if s.allow_all_tools]
    return allowed


def mcp_config_path(config: Config) -> Path:
    """Where the ``--mcp-config`` file of ``config`` is kept: in its state directory, or in a
    private temporary directory of this process."""
    return (config.state_dir or _scratch_dir()) / MCP_CONFIG_FILE


@functools.cache
def _scratch_dir() -> Path:
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="hive-claude-"))  # 0700, made for this process alone
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def write_mcp_config(config: Config) -> Path | None:
    """Write ``--mcp-config``'s file for the configured servers (0600, replaced whole, never
    through a symlink); its path, or None without servers."""
    if not config.mcp_servers:
        return None
    from hive._files import write_atomic

    path = mcp_config_path(config)
    write_atomic(path, mcp_config(config).encode(), durable=False)
    return path


def turn_argv(
    command: str, config: Config, session_id: str | None, mcp_file: Path | None = None
) -> list[str]:
    """``claude --print --input-format text --output-format stream-json --verbose [...]``:
    no prompt (it goes to stdin, see ``turn_stdin``); the MCP servers from ``mcp_file``
    (``write_mcp_config``), if given.

    The session is resumed with ``--resume=<id>`` (the equals form: the option's value is
    optional, so a value starting with ``-`` would read as another flag).
    """
    argv = [command, *BASE_FLAGS]
    if session_id is not None:
        argv.append(f"--resume={session_id}")
    if config.model:
        argv += ["--model", config.model]
    if config.effort:
        argv += ["--effort", config.effort]
    if config.system_prompt:
        argv += ["--append-system-prompt", config.system_prompt]
    mode = PERMISSION_MODES[config.permission]
    if mode is not None:
        argv += ["--permission-mode", mode]
    if mcp_file is not None:
        argv += ["--mcp-config", str(mcp_file), "--strict-mcp-config"]
    allowed = allowed_tools(config)
    if allowed:
        argv.append("--allowedTools=" + ",".join(allowed))
    if config.disallowed_tools:
        argv.append("--disallowedTools=" + ",".join(config.disallowed_tools))
    return argv


def turn_stdin(prompt: str) -> bytes:
    """What claude reads on stdin: the prompt, whole (no size bound: it is not an argument)."""
    return prompt.encode()


def turn_env(config: Config, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness's environment with the configured additions and the caller's (a turn's
    ``TRACEPARENT``: `hive.runtime.agent_environment`); without CLAUDECODE, which would make
    claude think it runs nested inside another Claude Code."""
    env = dict(os.environ if base is None else base)
    env.pop("CLAUDECODE", None)
    env.update(config.env)
    env.update(added_environment())
    return env


def first_command(spec: RuntimeSpec, config: Config, prompt: str, session_id: str | None) -> AgentCommand:
    """The claude a first turn starts: ``prompt`` on ``session_id`` (a new session if None).
    Writes the ``--mcp-config`` file it names, as the runtime's turn does."""
    argv = turn_argv(spec.claude_command, config, session_id, write_mcp_config(config))
    return AgentCommand(tuple(argv), turn_env(config), stdin_data=turn_stdin(prompt))
