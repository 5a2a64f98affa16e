"""The Runtime interface an agent's turns are driven through, and what every backend shares.

Each name is imported from its module on first use: what ``hive run`` needs before it spawns
the agent (the configuration, the spec, the argv) must not cost it Trio's import, which it
makes while the agent starts.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.runtime._config import CompactionPolicy, Config, HttpServer, McpServer, Permission, StdioServer
    from hive.runtime._errors import (
        AgentRefused,
        AgentUnavailable,
        HiveRuntimeError,
        IdleKilled,
        IdleTimeout,
        SessionNotFound,
        SpecError,
        TurnFailed,
        one_error,
    )
    from hive.runtime._lifetime import die_with_parent, start_time
    from hive.runtime._prestart import AgentCommand, Prestart, interrupt_unclaimed, prestart
    from hive.runtime._process import (
        SIGNALS_SENT,
        AgentGroup,
        AgentProcess,
        AgentWatcher,
        SentSignal,
        StderrTail,
        release_prestarted,
        start_agent,
        watching_agents,
    )
    from hive.runtime._protocol import Canceller, Choices, Progress, Runtime, StopReason, TurnOutcome
    from hive.runtime._spec import AGENT_COMMANDS, BACKENDS, Backend, RuntimeSpec, first_command, open_runtime
    from hive.runtime._stopper import TurnStopper

_MODULES = {
    "_config": ("CompactionPolicy", "Config", "HttpServer", "McpServer", "Permission", "StdioServer"),
    "_errors": (
        "AgentRefused",
        "AgentUnavailable",
        "HiveRuntimeError",
        "IdleKilled",
        "IdleTimeout",
        "SessionNotFound",
        "SpecError",
        "TurnFailed",
        "one_error",
    ),
    "_lifetime": ("die_with_parent", "start_time"),
    "_prestart": ("AgentCommand", "Prestart", "interrupt_unclaimed", "prestart"),
    "_process": (
        "SIGNALS_SENT",
        "AgentGroup",
        "AgentProcess",
        "AgentWatcher",
        "SentSignal",
        "StderrTail",
        "release_prestarted",
        "start_agent",
        "watching_agents",
    ),
    "_protocol": ("Canceller", "Choices", "Progress", "Runtime", "StopReason", "TurnOutcome"),
    "_spec": ("AGENT_COMMANDS", "BACKENDS", "Backend", "RuntimeSpec", "first_command", "open_runtime"),
    "_stopper": ("TurnStopper",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "AGENT_COMMANDS",
    "BACKENDS",
    "SIGNALS_SENT",
    "AgentCommand",
    "AgentGroup",
    "AgentProcess",
    "AgentRefused",
    "AgentWatcher",
    "AgentUnavailable",
    "Backend",
    "Canceller",
    "Choices",
    "CompactionPolicy",
    "Config",
    "HiveRuntimeError",
    "HttpServer",
    "IdleKilled",
    "IdleTimeout",
    "McpServer",
    "Permission",
    "Prestart",
    "Progress",
    "Runtime",
    "RuntimeSpec",
    "SentSignal",
    "SessionNotFound",
    "SpecError",
    "StderrTail",
    "StdioServer",
    "StopReason",
    "TurnFailed",
    "TurnOutcome",
    "TurnStopper",
    "die_with_parent",
    "first_command",
    "interrupt_unclaimed",
    "one_error",
    "open_runtime",
    "prestart",
    "release_prestarted",
    "start_agent",
    "start_time",
    "watching_agents",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
