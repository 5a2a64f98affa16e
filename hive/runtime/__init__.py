"""The Runtime interface an agent's turns are driven through, and what every backend shares."""

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
from hive.runtime._process import (
    SIGNALS_SENT,
    AgentGroup,
    AgentProcess,
    AgentWatcher,
    SentSignal,
    StderrTail,
    start_agent,
    watching_agents,
)
from hive.runtime._protocol import Canceller, Choices, Progress, Runtime, StopReason, TurnOutcome
from hive.runtime._spec import BACKENDS, Backend, RuntimeSpec, open_runtime
from hive.runtime._stopper import TurnStopper

__all__ = [
    "BACKENDS",
    "SIGNALS_SENT",
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
    "one_error",
    "open_runtime",
    "start_agent",
    "watching_agents",
]
