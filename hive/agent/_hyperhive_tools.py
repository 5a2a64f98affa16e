"""The hyperhive tools, `compact` and `loose_ends`: their specs and behaviour.

Nothing here knows MCP: each tool takes the raw arguments and returns a
:class:`hive.daemon.PlainAnswer` (text for the agent, and the same as structured content, as the bash
tools do). ``_hyperhive`` serves them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from hive._arguments import ArgumentError, answer_schema, check_arguments, file_schema
from hive.agent._loose_ends import UNKNOWN, describe, read_loose_ends
from hive.agent_socket import Refused
from hive.daemon import PlainAnswer

DEFAULT_LIMIT = 50

_ERRORS = "BadArgument, DiskError, CompactRefused"
"""The kinds of the hyperhive tools' errors (``error`` in an answer)."""

_NULLABLE_STRING = {"type": ["string", "null"]}
_LOOSE_END = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The task's id (its name, if it was given one)."},
        "cmd": {"type": "string", "description": "The command; a long one is cut, see cmd_path."},
        "cmd_path": file_schema("the whole command"),
        "state": {
            "type": "string",
            "enum": ["running", "done", "timed_out", "stopped", "interrupted", UNKNOWN],
            "description": f"running, or how it ended; {UNKNOWN} if it ended but its final record cannot be "
            "read (its wake's body says how it ended).",
        },
        "ended": {"type": "boolean", "description": "Whether the task has ended (its end is owed to you)."},
        "exit_code": {"type": ["integer", "null"]},
        "since": {"type": ["number", "null"], "description": "When the task was started (Unix time)."},
        "ended_at": {"type": ["number", "null"], "description": "When it ended (Unix time)."},
        "stdout_path": file_schema("its whole stdout"),
        "stderr_path": file_schema("its whole stderr"),
        "wake": {
            "type": ["object", "null"],
            "description": "The wake its end is owed as (null while it runs): who it is from and its body.",
            "properties": {"from": {"type": "string"}, "body": {"type": "string"}},
            "required": ["from", "body"],
        },
    },
    "required": [
        "id",
        "cmd",
        "state",
        "ended",
        "exit_code",
        "since",
        "ended_at",
        "stdout_path",
        "stderr_path",
        "wake",
    ],
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "loose_ends",
        "description": "The background bash tasks (started with the bash tools' `run`) whose end you have not "
        "been told yet, oldest first: each with its id, command, state (still running, or how it ended), exit "
        "code, the files holding its stdout and stderr, and, for one that ended, the wake still owed to you. "
        "Use it after a restart or a compaction to find the work you left in flight. Listing does not settle "
        "a task: `status` of the bash tools with its id does, for an ended one.",
        "input_schema": {
            "type": "object",
            "properties": {
                "limit": {
                    "type": "integer",
                    "minimum": 0,
                    "default": DEFAULT_LIMIT,
                    "description": f"At most this many (default {DEFAULT_LIMIT}, the oldest); 0 for all of them.",
                }
            },
            "additionalProperties": False,
        },
        "output_schema": answer_schema(
            {
                "loose_ends": {"type": "array", "items": _LOOSE_END},
                "total": {"type": "integer", "description": "How many loose ends there are in all."},
                "ended": {"type": "integer", "description": "How many of them have ended."},
                "unreadable": {
                    "type": "array",
                    "description": "Files in the loose-ends directory that are not loose ends the daemon wrote.",
                    "items": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "reason": {"type": "string"}},
                        "required": ["path", "reason"],
                    },
                },
            },
            ["loose_ends", "total", "ended", "unreadable"],
            errors=_ERRORS,
        ),
    },
    {
        "name": "compact",
        "description": "Compact your conversation once this turn ends: the harness replaces what came before "
        "with a summary, which frees your context. Use it when your context is filling up, or when a large "
        "piece of work is done and its details are no longer needed. It takes effect only after the turn "
        "ends, so write down first anything you must not lose.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "output_schema": answer_schema(
            {
                "requested": {"type": "boolean", "description": "True: compaction follows this turn."},
                "when": {"type": "string", "enum": ["after_this_turn"]},
            },
            ["requested", "when"],
            errors=_ERRORS,
        ),
    },
]

COMPACT_ANSWER = (
    "Compaction requested: your conversation will be compacted once this turn ends, its earlier part "
    "replaced by a summary. Before you end the turn, write down anything you must not lose."
)


def _error(text: str, kind: str) -> PlainAnswer:
    return PlainAnswer(text, {"error": kind, "message": text}, is_error=True)


@attrs.define(eq=False)
class HyperhiveTools:
    """The tools' behaviour, apart from MCP: raw arguments in, a :class:`PlainAnswer` out."""

    loose_ends_dir: Path
    on_compact: Callable[[], Awaitable[None]]
    """Asks the harness to compact after this turn; returns once that is written down, or raises
    :class:`Refused` saying why it could not be."""
    clock: Callable[[], float] = time.time

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> PlainAnswer:
        """Run tool ``name``; a caller's mistake comes back as an error result, never an exception."""
        schema = _SCHEMAS.get(name)
        if schema is None:
            tools = ", ".join(tool["name"] for tool in TOOLS)
            return _error(f"unknown tool {name!r}; the hyperhive tools are {tools}", "unknown_tool")
        try:
            args = check_arguments(schema, arguments)
        except ArgumentError as exc:
            return _error(str(exc), "BadArgument")
        if name == "loose_ends":
            return await self.loose_ends(args)
        return await self.compact(args)

    async def compact(self, args: dict[str, Any]) -> PlainAnswer:
        """Ask the harness to compact once this turn ends (``args``: checked, none)."""
        try:
            await self.on_compact()
        except Refused as exc:
            return _error(f"compaction not requested: {exc}. Call compact again later.", "CompactRefused")
        return PlainAnswer(
            COMPACT_ANSWER, {"requested": True, "when": "after_this_turn", "message": COMPACT_ANSWER}
        )

    async def loose_ends(self, args: dict[str, Any]) -> PlainAnswer:
        """The loose ends, oldest first (``args``: checked, with ``limit``)."""
        limit: int = args["limit"]
        try:
            # Abandoned on cancel: a read is safe to leave behind, and a stuck disk must not hold
            # up the server's shutdown.
            listing = await trio.to_thread.run_sync(
                read_loose_ends, self.loose_ends_dir, abandon_on_cancel=True
            )
        except OSError as exc:
            return _error(
                f"cannot list the loose ends in {self.loose_ends_dir}: {exc.strerror or exc}; the harness's "
                "operator must fix that directory (it belongs to the bash daemon)",
                "DiskError",
            )
        text, structured = describe(listing, self.loose_ends_dir, limit=limit, now=self.clock())
        return PlainAnswer(text, structured)


_SCHEMAS: dict[str, dict[str, Any]] = {tool["name"]: tool["input_schema"] for tool in TOOLS}
