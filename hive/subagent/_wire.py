"""The subagent daemon's socket: one JSON object a line, each request answered by one line.

    {"tool":"start","arguments":{...},"caller":{"cwd":...,"env":{...},...}}
        -> {"text":"...","structured":{...},"is_error":false}

``hive-subagent-mcp`` sends each tool call of its MCP client as it came, with who calls
(``Caller``: the working directory and environment the subagent's agent runs in, the agent
socket its ends are told to); the daemon checks the arguments and answers with the tool's
result. A line the daemon cannot read is answered ``is_error`` and the connection stays
usable. A peer of another uid (not root) gets one refusal line, then the connection closes.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hive.subagent._convert import DecodeError, structure, unstructure

MAX_LINE = 16 * 1024 * 1024


@attrs.frozen
class Caller:
    """Who calls a tool: the subagent's agent runs in ``cwd`` with ``env`` (over the daemon's)."""

    cwd: str
    env: dict[str, str] = attrs.field(factory=dict)
    agent_socket: str | None = None
    """Where the ends of the turns it starts are told (its HIVE_AGENT_SOCKET); None: nowhere."""
    permission: str = "default"
    idle_timeout: float | None = None


@attrs.frozen
class Call:
    tool: str
    arguments: dict[str, Any]
    caller: Caller


@attrs.frozen
class Answer:
    text: str
    structured: dict[str, Any]
    is_error: bool = False


def encode(message: Call | Answer) -> bytes:
    return json.dumps(unstructure(message), separators=(",", ":")).encode() + b"\n"


def _load(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"not JSON: {str(exc)[:200]}") from None


def decode_call(line: bytes) -> Call:
    raw = _load(line)
    if not isinstance(raw, dict):
        raise DecodeError("expected a JSON object with tool, arguments and caller")
    return structure(raw, Call)


def decode_answer(line: bytes) -> Answer:
    return structure(_load(line), Answer)


def refusal(reason: str) -> Answer:
    return Answer(text=reason, structured={"message": reason, "error": "Refused"}, is_error=True)
