"""The ACP backend's errors."""

from __future__ import annotations

from typing import Any

from hive.runtime import IS_SANDBOX_HINT, HiveRuntimeError, refused_as_root


class AcpError(HiveRuntimeError):
    """Base of the ACP backend's errors."""


class JsonRpcError(AcpError):
    """An error answer (ours or the agent's), with its JSON-RPC code."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_wire(cls, error: dict[str, Any]) -> JsonRpcError:
        """The error of a JSON-RPC ``error`` object (one missing its code or message still is one)."""
        code = error.get("code")
        message = error.get("message")
        return cls(
            code if isinstance(code, int) else -32603,
            message if isinstance(message, str) else "the agent's error carries no message",
            error.get("data"),
        )


class AgentExited(AcpError):
    """The agent's output ended (it exited or closed stdout) while something waited on it."""

    def __init__(self, status: int | None, stderr_tail: str) -> None:
        how = f"exited with status {status}" if status is not None else "closed its output"
        tail = stderr_tail.strip()
        hint = f"; {IS_SANDBOX_HINT}" if refused_as_root(tail) else ""
        super().__init__(
            f"the ACP agent {how}" + (f"; its stderr ends with: {tail[-2000:]}" if tail else "") + hint
        )
        self.status = status
        self.stderr_tail = stderr_tail
