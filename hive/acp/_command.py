"""The command an ACP agent is spawned with (no Trio here: ``hive run`` spawns it before
importing Trio)."""

from __future__ import annotations

import os

from hive.runtime import AgentCommand, Config, RuntimeSpec, added_environment


def agent_command(spec: RuntimeSpec, config: Config) -> AgentCommand:
    """``HIVE_ACP_COMMAND`` and its arguments, in hive's environment with the spec's and the
    configuration's additions, and the caller's where it spawns the agent (the ``TRACEPARENT`` of
    the turn it is spawned for: `hive.runtime.agent_environment`); stdin a pipe (JSON-RPC goes
    both ways)."""
    if spec.command is None:
        raise ValueError("an ACP spec without a command")
    env = {**os.environ, **dict(spec.env), **dict(config.env), **added_environment()}
    return AgentCommand((spec.command, *spec.args), env, stdin_pipe=True)


def first_command(spec: RuntimeSpec, config: Config, prompt: str, session_id: str | None) -> AgentCommand:
    """The agent a first turn starts (the same whatever the prompt or the session)."""
    return agent_command(spec, config)
