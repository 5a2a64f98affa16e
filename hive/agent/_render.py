"""The turn log for a person (``hive agent log``): each turn's trigger, the agent's text, its tool
calls with their input and a short result, errors, tokens and context usage.

Pure functions of the log's JSON objects to lines of text: no I/O, so the demo, ``hive agent
log`` and ``hive agent log --follow`` render alike (:class:`LogRenderer`), and a test needs no
process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from hive._when import in_seconds

SHORT = 200
"""How much of a tool's input or result, or a carried message, a line shows."""
TEXT_LINES = 40
"""How many lines of the agent's text a turn shows."""


def short(text: str, limit: int = SHORT) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _when(stamp: Any) -> str:
    if not isinstance(stamp, int | float):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def render_line(obj: dict[str, Any]) -> list[str]:
    """One stream-json line of a turn, as the lines a person reads (none for bookkeeping)."""
    kind = obj.get("type")
    if kind == "assistant":
        return _assistant(obj)
    if kind == "user":
        return _user(obj)
    if kind == "result":
        return _result(obj)
    if kind == "system" and obj.get("subtype") == "init":
        servers = [s.get("name", "?") for s in obj.get("mcp_servers", []) if isinstance(s, dict)]
        extra = f" · MCP servers: {', '.join(servers)}" if servers else ""
        return [f"   session {obj.get('session_id', '?')}{extra}"]
    return []


def _blocks(obj: dict[str, Any]) -> list[dict[str, Any]]:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _assistant(obj: dict[str, Any]) -> list[str]:
    lines = []
    for block in _blocks(obj):
        match block.get("type"):
            case "text":
                text = str(block.get("text", "")).rstrip().splitlines() or [""]
                shown = text[:TEXT_LINES] + (
                    [f"… ({len(text) - TEXT_LINES} more lines)"] if len(text) > TEXT_LINES else []
                )
                lines += ["   agent: " + shown[0], *("          " + line for line in shown[1:])]
            case "thinking":
                lines.append("   (thinking) " + short(str(block.get("thinking", "")), 120))
            case "tool_use":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(", ", ": "))
                lines.append(f"   → {block.get('name', '?')} {short(arguments)}")
    return lines


def _user(obj: dict[str, Any]) -> list[str]:
    lines = []
    for block in _blocks(obj):
        if block.get("type") != "tool_result":
            continue
        text = short(_tool_text(block, obj.get("tool_use_result")))
        lines.append(f"   ← {'error: ' if block.get('is_error') else ''}{text or '(no output)'}")
    return lines


def _tool_text(block: dict[str, Any], tool_use_result: Any) -> str:
    """What a tool returned, as a person reads it.

    claude gives the model an MCP tool's structured content in place of its text: the
    tool_result's content is then that structured content as JSON, and the line's
    ``tool_use_result.structuredContent`` is the same as an object. When the two agree, what is
    shown is the structured content's ``message``, where hive's tools put their text (for a
    task's full status, its headline and guidance)."""
    content = block.get("content")
    if isinstance(content, list):
        content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    text = str(content or "")
    structured = tool_use_result.get("structuredContent") if isinstance(tool_use_result, dict) else None
    if isinstance(structured, dict) and isinstance(structured.get("message"), str):
        try:
            same = json.loads(text) == structured
        except ValueError:
            same = False
        if same:
            return str(structured["message"])
    return text


def _result(obj: dict[str, Any]) -> list[str]:
    if not obj.get("is_error"):
        return []
    errors = obj.get("errors") or []
    why = (
        "; ".join(str(e) for e in errors) if isinstance(errors, list) and errors else obj.get("result") or ""
    )
    return [f"   error ({obj.get('subtype', '?')}): {short(str(why))}"]


def render_header(record: dict[str, Any]) -> list[str]:
    """What a turn carried (or who asked for a compaction)."""
    number, started = record.get("turn", "?"), record.get("started")
    if record.get("kind") == "compact":
        return [
            f"── compaction {number} · {_when(started)} · asked for by {record.get('requested_by') or '?'}"
        ]
    lines = [f"── turn {number} · {_when(started)}"]
    for item in record.get("carried", []):
        what = "wake" if item.get("kind") == "wake" else "message"
        lines.append(f"   {what} from {item.get('from', '?')}: {short(str(item.get('body', '')), 120)}")
    return lines


def render_ending(record: dict[str, Any]) -> list[str]:
    """How a turn ended: its outcome, time, tokens and context usage, and any error."""
    parts = [str(record.get("outcome", "?"))]
    started, ended = record.get("started"), record.get("ended")
    if isinstance(started, int | float) and isinstance(ended, int | float):
        parts.append(in_seconds(ended - started))
    tokens = record.get("tokens") or {}
    if isinstance(tokens, dict) and tokens:
        into = sum(v for k, v in tokens.items() if k.endswith("input_tokens") and isinstance(v, int))
        parts.append(f"tokens {into:,} in / {_number(tokens.get('output_tokens'))} out")
    used, size = record.get("context_used"), record.get("context_size")
    if isinstance(used, int):
        parts.append(
            f"context {used:,}/{size:,} ({used / size:.0%})"
            if isinstance(size, int) and size
            else f"context {used:,}"
        )
    if record.get("kind") == "turn" and not record.get("delivered", True):
        parts.append("its messages wait for the next turn")
    lines = ["   ended: " + " · ".join(parts)]
    if record.get("error"):
        lines.append("   error: " + short(str(record["error"]), 400))
    return lines


START = "hive_start"
"""The type of a turn's first line in the log (what it carries); ``hive`` is its last (its end)."""
END = "hive"


class LogRenderer:
    """The turn log for a person, fed one JSON object of it at a time.

    ``hive agent log`` feeds it the whole log and ``hive agent log --follow`` each line as it
    comes, so both show a turn alike: its header (what it carried) first, then its stream, then
    its end and an empty line. A turn whose stream has no start line before it (a log written
    before hive wrote them) is held until its end, which says what it carried.
    """

    def __init__(self) -> None:
        self._open: dict[str, Any] | None = None
        """The start of the turn whose stream is being shown."""
        self._held: list[dict[str, Any]] = []
        """A stream with no start before it, held until its end."""

    def feed(self, obj: dict[str, Any]) -> list[str]:
        """The lines ``obj`` (the log's next line) adds."""
        kind = obj.get("type")
        if kind == START:
            lines = self._cut_short()
            self._open = obj
            return [*lines, *render_header(obj)]
        if kind == END:
            if self._open is not None and self._open.get("turn") == obj.get("turn"):
                self._open = None
                return [*render_ending(obj), ""]
            held, self._held = self._held, []
            lines = self._cut_short()
            return [
                *lines,
                *render_header(obj),
                *(text for line in held for text in render_line(line)),
                *render_ending(obj),
                "",
            ]
        if self._open is None:
            self._held.append(obj)
            return []
        return render_line(obj)

    def finish(self) -> list[str]:
        """The end of a log read whole (not followed): a turn that has not ended is said to be so."""
        if self._open is not None:
            return ["   … no end yet: the turn is running (or hive-agent died during it)"]
        if self._held:
            held, self._held = self._held, []
            return ["── a turn in progress", *(text for line in held for text in render_line(line))]
        return []

    def _cut_short(self) -> list[str]:
        """A turn that never ended (hive-agent died during it), once another begins."""
        lines: list[str] = []
        if self._open is not None:
            lines = ["   ended: never: hive-agent stopped before the turn's end was written", ""]
        if self._held:
            lines += [
                "── a turn whose start and end are not in the log",
                *(text for line in self._held for text in render_line(line)),
                "",
            ]
        self._open, self._held = None, []
        return lines


def render_log(objects: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The whole log, a turn at a time: its trigger first, then its stream, then its end (as
    :class:`LogRenderer` shows it); a turn still running last."""
    renderer = LogRenderer()
    for obj in objects:
        yield from renderer.feed(obj)
    yield from renderer.finish()
