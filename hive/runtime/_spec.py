"""Which runtime to use, read from the environment, and opening it."""

from __future__ import annotations

import enum
import importlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs

from hive._spawn import on_path
from hive.runtime._config import Config
from hive.runtime._errors import AgentUnavailable, SpecError
from hive.runtime._prestart import AgentCommand
from hive.runtime._protocol import Progress, Runtime


class Backend(enum.Enum):
    """Which runtime runs an agent's turns (``HIVE_RUNTIME``)."""

    CLAUDE = "claude"
    ACP = "acp"


@attrs.frozen
class RuntimeSpec:
    """What to spawn: claude (``claude_command``), or an ACP agent (``command``, ``args``, ``env``)."""

    backend: Backend = Backend.CLAUDE
    claude_command: str = "claude"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeSpec:
        """From HIVE_RUNTIME (claude | acp), HIVE_CLAUDE_COMMAND, HIVE_ACP_COMMAND,
        HIVE_ACP_ARGS (a JSON list of strings) and HIVE_ACP_ENV (a JSON object of strings)."""
        env = os.environ if env is None else env
        raw = env.get("HIVE_RUNTIME", "claude").strip() or "claude"
        try:
            backend = Backend(raw)
        except ValueError:
            raise SpecError("HIVE_RUNTIME", f"{raw!r} is not a runtime; use 'claude' or 'acp'") from None
        claude_command = env.get("HIVE_CLAUDE_COMMAND", "").strip() or "claude"
        command = env.get("HIVE_ACP_COMMAND", "").strip() or None
        args = _string_list(env, "HIVE_ACP_ARGS")
        agent_env = _string_map(env, "HIVE_ACP_ENV")
        if backend is Backend.ACP and command is None:
            raise SpecError(
                "HIVE_ACP_COMMAND", "is required when HIVE_RUNTIME=acp: the ACP agent's executable"
            )
        return cls(backend=backend, claude_command=claude_command, command=command, args=args, env=agent_env)

    def check_executable(self, env: Mapping[str, str] | None = None) -> None:
        """Raise AgentUnavailable unless the agent's command names an executable, looked for as
        its spawn looks for it: on the PATH of ``env`` (default: hive's own environment with,
        for ACP, the spec's additions). So a missing agent is found at start, not at a turn."""
        if self.backend is Backend.CLAUDE:
            command, variable = self.claude_command, "HIVE_CLAUDE_COMMAND"
        else:
            command, variable = self.command or "", "HIVE_ACP_COMMAND"
        if env is None:
            env = {**os.environ, **dict(self.env)} if self.backend is Backend.ACP else os.environ
        if not command or on_path(command, env.get("PATH", os.defpath)) is None:
            where = "" if "/" in command else " on PATH"
            raise AgentUnavailable(
                f"cannot start {command!r}: no such executable{where}; install the "
                f"{self.backend.value} agent, or set {variable} to its path"
            )


def _string_list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    raw = env.get(name, "").strip()
    if not raw:
        return ()
    value = _json(raw, name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(name, 'must be a JSON list of strings, e.g. ["--flag", "value"]')
    return tuple(value)


def _string_map(env: Mapping[str, str], name: str) -> tuple[tuple[str, str], ...]:
    raw = env.get(name, "").strip()
    if not raw:
        return ()
    value = _json(raw, name)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SpecError(name, 'must be a JSON object of strings, e.g. {"KEY": "value"}')
    return tuple(sorted(value.items()))


def _json(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise SpecError(name, f"is not valid JSON ({exc})") from None


# Backends live above this layer (they import it), so they are named here, not imported:
# opening one imports it then. Each entry is "module:function", the function taking
# (spec, config, session_id, *, progress) and returning an async context manager of a Runtime.
BACKENDS: dict[Backend, str] = {
    Backend.CLAUDE: "hive.claude:open_claude_runtime",
    Backend.ACP: "hive.acp:open_acp_runtime",
}


# The command of the agent a first turn starts, per backend ("module:function", the function
# taking (spec, config, prompt, session_id) and returning an AgentCommand); the module must not
# import Trio. ``hive run`` spawns that agent before it imports the rest (see _prestart).
AGENT_COMMANDS: dict[Backend, str] = {
    Backend.CLAUDE: "hive.claude._argv:first_command",
    Backend.ACP: "hive.acp._command:first_command",
}


def first_command(spec: RuntimeSpec, config: Config, prompt: str, session_id: str | None) -> AgentCommand:
    """The command the first turn of ``prompt`` on ``session_id`` spawns its agent with."""
    command: AgentCommand = _backend_function(AGENT_COMMANDS, spec.backend)(spec, config, prompt, session_id)
    return command


def _backend_function(table: Mapping[Backend, str], backend: Backend) -> Any:
    """The function ``table`` names for ``backend`` ("module:function"), its module imported now."""
    module_name, _, function = table[backend].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        raise SpecError(
            "HIVE_RUNTIME", f"the {backend.value} runtime is not available in this hive"
        ) from None
    return getattr(module, function)


class Opener(Protocol):
    def __call__(
        self,
        spec: RuntimeSpec,
        config: Config,
        session_id: str | None = None,
        *,
        progress: Progress | None = None,
    ) -> AbstractAsyncContextManager[Runtime]: ...


@asynccontextmanager
async def open_runtime(
    spec: RuntimeSpec, config: Config, *, session_id: str | None = None, progress: Progress | None = None
) -> AsyncIterator[Runtime]:
    """The runtime ``spec`` names, configured by ``config``, continuing ``session_id`` if given.
    ``progress`` follows what it waits for (so a caller that stops it can say where it stood)."""
    opener: Opener = _backend_function(BACKENDS, spec.backend)
    async with opener(spec, config, session_id, progress=progress) as runtime:
        yield runtime
