"""The command line and environment of one `claude --print` turn."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from hive.runtime import AgentCommand, Config, HttpServer, Permission, RuntimeSpec, StdioServer

BASE_FLAGS = ("--print", "--output-format", "stream-json", "--verbose")
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


def turn_argv(command: str, config: Config, prompt: str, session_id: str | None) -> list[str]:
    """``claude --print --output-format stream-json --verbose [...] -- PROMPT``.

    The session is resumed with ``--resume=<id>`` (the equals form: the option's value is
    optional, so a value starting with ``-`` would read as another flag). The prompt comes
    after ``--`` so that one starting with ``-`` stays a prompt.
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
    if config.mcp_servers:
        argv += ["--mcp-config", mcp_config(config), "--strict-mcp-config"]
    allowed = allowed_tools(config)
    if allowed:
        argv.append("--allowedTools=" + ",".join(allowed))
    if config.disallowed_tools:
        argv.append("--disallowedTools=" + ",".join(config.disallowed_tools))
    return [*argv, "--", prompt]


def turn_env(config: Config, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness's environment with the configured additions; without CLAUDECODE, which
    would make claude think it runs nested inside another Claude Code."""
    env = dict(os.environ if base is None else base)
    env.pop("CLAUDECODE", None)
    env.update(config.env)
    return env


def first_command(spec: RuntimeSpec, config: Config, prompt: str, session_id: str | None) -> AgentCommand:
    """The claude a first turn starts: ``prompt`` on ``session_id`` (a new session if None)."""
    return AgentCommand(tuple(turn_argv(spec.claude_command, config, prompt, session_id)), turn_env(config))
