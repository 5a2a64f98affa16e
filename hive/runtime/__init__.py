"""The Runtime interface an agent's turns are driven through, and what every backend shares.

Each name is imported from its module on first use: what ``hive run`` needs before it spawns
the agent (the configuration, the spec, the argv) must not cost it Trio's import, which it
makes while the agent starts.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "AGENT_COMMANDS",
    "BACKENDS",
    "SIGNALS_SENT",
    "SINK_GRACE",
    "STOP_GRACE",
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
    "IS_SANDBOX_HINT",
    "HttpServer",
    "IdleKilled",
    "IdleTimeout",
    "McpServer",
    "Permission",
    "Prestart",
    "Progress",
    "RefusedAsRoot",
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
    "added_environment",
    "agent_environment",
    "first_command",
    "guarding_agents",
    "interrupt_unclaimed",
    "one_error",
    "open_runtime",
    "prestart",
    "refused_as_root",
    "release_prestarted",
    "start_agent",
    "watching_agents",
]

if TYPE_CHECKING:
    from hive.runtime._config import (
        SINK_GRACE,
        STOP_GRACE,
        CompactionPolicy,
        Config,
        HttpServer,
        McpServer,
        Permission,
        StdioServer,
    )
    from hive.runtime._environment import added_environment, agent_environment
    from hive.runtime._errors import (
        IS_SANDBOX_HINT,
        AgentRefused,
        AgentUnavailable,
        HiveRuntimeError,
        IdleKilled,
        IdleTimeout,
        RefusedAsRoot,
        SessionNotFound,
        SpecError,
        TurnFailed,
        one_error,
        refused_as_root,
    )
    from hive.runtime._guard import guarding_agents
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

export_lazily(__name__)
