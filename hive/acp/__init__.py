"""The ACP backend: any Agent Client Protocol agent as a hive runtime.

Each name is imported from its module on first use: ``hive run`` needs the agent's command
(``_command``) before it imports Trio, which the rest needs.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "AcpChoices",
    "AcpError",
    "AcpRuntime",
    "AgentExited",
    "Connection",
    "JsonRpcError",
    "Pending",
    "Translator",
    "agent_command",
    "open_acp_runtime",
]

if TYPE_CHECKING:
    from hive.acp._command import agent_command
    from hive.acp._errors import AcpError, AgentExited, JsonRpcError
    from hive.acp._jsonrpc import Connection, Pending
    from hive.acp._runtime import AcpRuntime, open_acp_runtime
    from hive.acp._session import AcpChoices
    from hive.acp._translate import Translator

export_lazily(__name__)
