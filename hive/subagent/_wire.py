"""The subagent daemon's socket: one JSON object a line, each request answered by one line.

    {"tool":"start","arguments":{...},"caller":{"cwd":...,"env":{...},...}}
        -> {"text":"...","structured":{...},"is_error":false}

``hive-subagent-mcp`` sends each tool call of its MCP client as it came, with who calls
(``Caller``: the working directory and environment the subagent's agent runs in, the agent
socket its ends are told to); the daemon checks the arguments and answers with the tool's
result. A line the daemon cannot read is answered ``is_error`` and the connection stays
usable; a line longer than 16 MiB (``MAX_LINE``) is answered ``is_error`` too, then the
connection closes. A peer of another uid (not root) gets one refusal line, then the connection
closes.

An answer that shows turn ends not yet told carries ``"confirm":true``: those ends count as
told only once the client says the answer reached its MCP client, still connected::

    {"text":"...","structured":{...},"is_error":false,"confirm":true}
    <- {"written":true}        (or false; no line, or the connection closing, counts as false)

``hive-subagent-mcp`` says so once it wrote the answer to its stdout whole while its client's
side (its stdin) was still open; otherwise the ends are told by wakes.
"""

from __future__ import annotations

from typing import Any

import attrs

from hive._lines import json_line, load_json
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
    confirm: bool = False
    """Turn ends are told by this answer only if the client answers :class:`Written` true."""


@attrs.frozen
class Written:
    """The client's word on an answer with ``confirm``: did it reach the MCP client, still there?"""

    written: bool


def encode(message: Call | Answer | Written) -> bytes:
    """``message`` as its line on the socket."""
    return json_line(unstructure(message))


def decode_call(line: bytes) -> Call:
    raw = load_json(line, DecodeError)
    if not isinstance(raw, dict):
        raise DecodeError("expected a JSON object with tool, arguments and caller")
    return structure(raw, Call)


def decode_answer(line: bytes) -> Answer:
    return structure(load_json(line, DecodeError), Answer)


def decode_written(line: bytes) -> Written:
    return structure(load_json(line, DecodeError), Written)


def refusal(reason: str) -> Answer:
    return Answer(text=reason, structured={"message": reason, "error": "Refused"}, is_error=True)
