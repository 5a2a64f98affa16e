"""The ACP backend: any Agent Client Protocol agent as a hive runtime.

Each name is imported from its module on first use: ``hive run`` needs the agent's command
(``_command``) before it imports Trio, which the rest needs.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.acp._errors import AcpError, AgentExited, JsonRpcError
    from hive.acp._jsonrpc import Connection, Pending
    from hive.acp._runtime import AcpRuntime, open_acp_runtime
    from hive.acp._session import AcpChoices
    from hive.acp._translate import Translator

_WHERE = {
    "AcpError": "_errors",
    "AgentExited": "_errors",
    "JsonRpcError": "_errors",
    "Connection": "_jsonrpc",
    "Pending": "_jsonrpc",
    "AcpRuntime": "_runtime",
    "open_acp_runtime": "_runtime",
    "AcpChoices": "_session",
    "Translator": "_translate",
}

__all__ = [
    "AcpChoices",
    "AcpError",
    "AcpRuntime",
    "AgentExited",
    "Connection",
    "JsonRpcError",
    "Pending",
    "Translator",
    "open_acp_runtime",
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
