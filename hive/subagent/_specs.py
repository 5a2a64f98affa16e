"""The four subagent tools as an MCP client sees them: names, descriptions, schemas.

The daemon's MCP server lists them (``_server``).
"""

from __future__ import annotations

from typing import Any

from hive._limits import MAX_NAME, MAX_WAIT, NAME_SCHEMA_PATTERN

_NAME = {
    "type": "string",
    "pattern": NAME_SCHEMA_PATTERN,
    "description": f"The subagent's name: 1 to {MAX_NAME} letters, digits, '.', '_' or '-' (e.g. 'reviewer'). "
    "It names its wakes (subagent-<name>) and its turn log.",
}
_PROMPT = {"type": "string", "minLength": 1, "description": "What the subagent is to do in this turn."}
_WAIT = {
    "type": "number",
    "minimum": 0,
    "description": f"Seconds to wait for the running turn to end before answering (0 to {MAX_WAIT:g}; "
    f"larger values are capped at {MAX_WAIT:g}). An end seen this way sends no wake.",
}
_MESSAGE = {"type": "string", "description": "What happened, and what to do next (the text answer's gist)."}
_ERROR = {
    "type": "string",
    "description": "Only on a tool error: its kind (BadArgument, UnknownSubagent, NameBusy, NameStopping); "
    "`message` says what was wrong and what to do.",
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_NUMBER = {"type": ["number", "null"]}
_SESSION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "runtime": {"type": "string", "enum": ["claude", "acp"]},
        "slot": {
            "type": ["string", "null"],
            "enum": ["starting", "running", "stopping", None],
            "description": "The turn's slot; null when the subagent is idle (ready to continue).",
        },
        "session_id": _NULLABLE_STRING,
        "model": _NULLABLE_STRING,
        "effort": _NULLABLE_STRING,
        "turns": {"type": "integer"},
        "log": {"type": "string", "description": "The file holding every turn's stream (stream-json)."},
        "turn": {
            "type": ["object", "null"],
            "description": "The turn in progress, if any.",
            "properties": {
                "number": {"type": "integer"},
                "running_secs": {"type": "number"},
                "pids": {"type": "array", "items": {"type": "integer"}},
                "interrupted_secs_ago": _NUMBER,
            },
        },
        "last_turn": {
            "type": ["object", "null"],
            "description": "How the last turn ended.",
            "properties": {
                "number": {"type": "integer"},
                "stop_reason": {
                    "type": "string",
                    "description": "completed, interrupted, exited, idle, failed, daemon_stopped or lost.",
                },
                "is_error": {"type": "boolean"},
                "result": {
                    "type": ["string", "null"],
                    "description": "The result text (its last 4000 characters).",
                },
                "errors": {"type": "array", "items": {"type": "string"}},
                "tokens": {"type": "object"},
                "context": {
                    "type": ["object", "null"],
                    "properties": {"used": {"type": "integer"}, "size": {"type": ["integer", "null"]}},
                },
                "duration_secs": {"type": "number"},
                "ended_at": {"type": "number"},
            },
        },
    },
    "required": ["name", "runtime", "slot", "session_id", "turns", "log", "turn", "last_turn"],
}


def _output(**properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"message": _MESSAGE, "error": _ERROR, **properties},
        "required": ["message"],
    }


def _tool(
    name: str,
    description: str,
    properties: dict[str, Any],
    *,
    required: list[str] | None = None,
    output: dict[str, Any],
) -> dict[str, Any]:
    """A tool as ``tools/list`` shows it: its arguments are ``properties`` (those in ``required``
    must be given), its structured answer is ``output``."""
    arguments: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        arguments["required"] = required
    return {"name": name, "description": description, "inputSchema": arguments, "outputSchema": output}


def _turn_tool(name: str, description: str, **more: Any) -> dict[str, Any]:
    """A tool that gives a subagent a turn on ``prompt`` (its arguments ``more`` besides), and
    answers with the session and the wake its end will send."""
    return _tool(
        name,
        description,
        {"name": _NAME, "prompt": _PROMPT, **more},
        required=["name", "prompt"],
        output=_output(subagent=_SESSION, wake=_NULLABLE_STRING),
    )


TOOLS: list[dict[str, Any]] = [
    _turn_tool(
        "start",
        (
            "Start a subagent: a new agent session named `name` whose first turn works on `prompt` in the "
            "background. It answers at once. When the turn ends you are woken by a message from "
            "`subagent-<name>` with the end of its result, unless a `status` call of yours was waiting for "
            "it and showed it to you. Then `continue(name, prompt)` gives it its next turn in the same "
            "session. `status(name, wait_seconds)` waits for it or checks on it; `interrupt(name)` stops it. "
            "`runtime` picks the agent (`claude` or `acp`; default: the runtime you run on), `model` and "
            "`effort` its model and effort level. Starting a name already in use (and idle) begins a new "
            "session under it; its earlier turns stay in its log."
        ),
        runtime={"type": "string", "enum": ["claude", "acp"], "description": "Which agent runs it."},
        model={"type": "string", "description": "The model (claude: an alias such as sonnet, or a full id)."},
        effort={
            "type": "string",
            "description": "The effort level (claude: low, medium, high, xhigh or max).",
        },
    ),
    _turn_tool(
        "continue",
        (
            "Give subagent `name` its next turn: `prompt` runs in its session (it remembers its earlier "
            "turns), in the background; it answers at once, and you are woken when the turn ends, as with "
            "`start`. Refused while a turn of it is running (wait for it with `status`, or `interrupt` it) "
            "or stopping (an interrupted turn whose agent has not exited yet: wait, then try again)."
        ),
    ),
    _tool(
        "status",
        (
            "Your subagents: for each, its slot (starting, running, stopping, or null when idle), session "
            "id, runtime and model, the turn in progress, and how its last turn ended: stop reason, result "
            "text (its end), tokens and context usage. With `name`, that subagent only. `wait_seconds` (up "
            f"to {MAX_WAIT:g}) first waits for the running turn (of `name`, or any) to end; an end shown to "
            "you here sends no wake."
        ),
        {"name": _NAME, "wait_seconds": _WAIT},
        output=_output(subagents={"type": "array", "items": _SESSION}),
    ),
    _tool(
        "interrupt",
        (
            "Stop subagent `name`'s running turn now. Its agent is sent SIGINT (an ACP agent gets "
            "session/cancel first, and SIGINT only if it does not answer), ends the turn on its own and "
            "reports what it did; nothing more forceful is ever sent. It answers at once, without waiting: "
            "a claude subagent is `stopping` until its agent has exited (continue is refused until then), "
            "an ACP subagent is free at once. You are woken when the turn has ended."
        ),
        {"name": _NAME},
        required=["name"],
        output=_output(subagent=_SESSION, sent=_NULLABLE_STRING),
    ),
]

TOOL_NAMES = tuple(tool["name"] for tool in TOOLS)
INSTRUCTIONS = (
    "Subagents: agents of your own that work in the background. `start` one with a task, and you are "
    "woken by subagent-<name> when its turn ends; `continue` gives it its next turn; `status` shows "
    "them (and waits for one); `interrupt` stops one with SIGINT."
)
