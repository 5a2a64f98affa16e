"""The ACP backend: any Agent Client Protocol agent as a hive runtime."""

from hive.acp._errors import AcpError, AgentExited, JsonRpcError
from hive.acp._jsonrpc import Connection, Pending
from hive.acp._runtime import AcpRuntime, open_acp_runtime
from hive.acp._session import AcpChoices
from hive.acp._translate import Translator

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
