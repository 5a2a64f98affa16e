"""What the kit's server and its stdio relay agree on: protocol versions, error codes, the
refusal line, the observer capability. Standard library only (the relay imports it).
"""

from __future__ import annotations

import json

__all__ = [
    "HANDSHAKE_VERSIONS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "OBSERVER",
    "PARSE_ERROR",
    "REFUSED",
    "error_line",
    "negotiate",
    "refusal_line",
    "refusal_of",
    "rpc_line",
]

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The MCP protocol versions the kit's server speaks, oldest first."""

OBSERVER = "hive/observer"
"""The experimental capability an MCP client declares at ``initialize`` to say it observes the
agent's work and is not the agent: no answer written to it settles an end the agent is owed."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REFUSED = -32003
"""The code of the one line a server writes to a connection it refuses (its uid check)."""


def negotiate(params: object) -> str:
    """The protocol version to answer ``initialize`` with: the client's if spoken here, else the newest."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def rpc_line(message: object) -> bytes:
    """``message`` as one line of JSON. Text that is not Unicode (a lone surrogate) is escaped,
    so the line is always UTF-8."""
    try:
        return json.dumps(message, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message).encode() + b"\n"


def error_line(request_id: object, code: int, message: str, data: object = None) -> bytes:
    """A JSON-RPC error answering ``request_id`` (None: a message that had no usable id)."""
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return rpc_line({"jsonrpc": "2.0", "id": request_id, "error": error})


def refusal_line(reason: str) -> bytes:
    """The one line a server writes to a connection it refuses, before closing it."""
    return error_line(None, REFUSED, reason)


def refusal_of(message: object) -> str | None:
    """The server's reason, if ``message`` is its :func:`refusal_line`."""
    if not isinstance(message, dict) or message.get("id") is not None or "method" in message:
        return None
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") == REFUSED and isinstance(error.get("message"), str):
        return str(error["message"])
    return None
