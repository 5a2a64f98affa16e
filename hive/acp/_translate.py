"""ACP session updates, written to a Sink in claude's stream-json shape.

Text and thought chunks become whole ``assistant`` text / thinking blocks (a block ends when
the kind or the message id changes, a tool call starts, or the turn ends); a tool call
becomes an ``assistant`` tool_use block once its input is settled (see `Translator._tool`) and a
``user`` tool_result when it completes or fails, read as claude's where the agent passes on a
structured result; each session starts with a ``system`` init and each turn ends with a
``result``. Context usage comes from ``usage_update``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import attrs

from hive.acp._outcome import Ending
from hive.acp._schema import MessageChunk, SchemaError, SessionUpdate, ToolCall, UsageUpdate, from_wire
from hive.sink import (
    ApiMessage,
    AssistantMessage,
    Batch,
    ContentBlock,
    ContextUsage,
    JsonObject,
    ResultMessage,
    Sink,
    SystemInit,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserContent,
    UserMessage,
)

TERMINAL_STATUSES = frozenset({"completed", "failed"})
RUNNING_STATUSES = frozenset({"in_progress", *TERMINAL_STATUSES})
"""A call with one of these statuses runs or has run: its input is the one it ran with."""


def tool_name(tool: ToolCall) -> str:
    """The tool's name as claude would write it: ``mcp__<server>__<tool>`` for MCP tools.

    ACP has no stable name field; agents put the real name in ``_meta`` (claude-agent-acp:
    ``_meta.claudeCode.toolName``) and a human title in ``title``.
    """
    meta = tool.meta or {}
    for vendor in meta.values():
        if isinstance(vendor, dict) and isinstance(vendor.get("toolName"), str):
            return str(vendor["toolName"])
    if isinstance(meta.get("toolName"), str):
        return str(meta["toolName"])
    return tool.title or tool.kind or "tool"


def tool_output(tool: ToolCall) -> str:
    """A tool call's output as text: its content items, else its raw output."""
    parts = []
    for item in tool.content or []:
        kind = item.get("type")
        if kind == "content":
            block = item.get("content") or {}
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
        elif kind == "diff":
            parts.append(f"(edited {item.get('path')})")
        elif kind == "terminal":
            parts.append(f"(terminal {item.get('terminalId')})")
    if parts:
        return "\n".join(parts)
    if tool.raw_output is not None:
        return tool.raw_output if isinstance(tool.raw_output, str) else json.dumps(tool.raw_output)
    return ""


def structured_output(raw_output: Any) -> JsonObject | None:
    """The structured result a rawOutput is, if it is one: an object, or an object's JSON.

    claude-agent-acp's rawOutput is claude's tool_result content, which for an MCP tool that
    returned structured content is that content as JSON (and its ``content`` the same text, fenced
    on an error); claude writes such a result with the object as ``tool_use_result.structuredContent``."""
    if isinstance(raw_output, str) and raw_output.lstrip().startswith("{"):
        try:
            raw_output = json.loads(raw_output)
        except ValueError:
            return None
    return raw_output if isinstance(raw_output, dict) else None


@attrs.define(eq=False)
class _Tool:
    call: ToolCall
    input: JsonObject | None = None  # from the last non-empty rawInput before its tool_use
    written: bool = False  # its tool_use
    finished: bool = False  # its tool_result


@attrs.define(eq=False)
class Translator:
    """One turn's worth of updates, in order, to one sink."""

    session_id: str
    sink: Sink
    model: str = ""
    started: float = attrs.field(factory=time.monotonic)
    usage: ContextUsage | None = None
    cost_usd: float = 0.0
    last_text: str = ""
    tool_changes: int = 0
    """How many times a tool call started or ended: one seen after a cancel was sent was under
    way when it was sent (its updates were still on their way)."""
    _kind: str | None = None
    _message_id: str | None = None
    _parts: list[str] = attrs.field(factory=list)
    _api_message_id: str = attrs.field(factory=lambda: f"msg_{uuid.uuid4().hex[:24]}")
    _tools: dict[str, _Tool] = attrs.field(factory=dict)

    async def init(self, cwd: str, *, mcp_servers: list[str], commands: list[str], agent: JsonObject) -> None:
        """The session's ``system`` init line; the agent's identity is in its ``agent`` field."""
        init = SystemInit(
            session_id=self.session_id,
            model=self.model,
            cwd=cwd,
            tools=[],
            mcp_servers=[{"name": name, "status": "connected"} for name in mcp_servers],
            permission_mode="default",
            uuid=str(uuid.uuid4()),
            extra={
                "apiKeySource": "none",
                "slash_commands": commands,
                "output_style": "default",
                "agent": agent,
                "runtime": "acp",
            },
        )
        await self.sink.write(Batch.of([init]))

    async def update(self, update: SessionUpdate) -> None:
        """Write what ``update`` adds to the turn's stream (text, a tool call, the context usage)."""
        if isinstance(update, MessageChunk):
            await self._chunk(update)
        elif isinstance(update, ToolCall):
            await self._tool(update)
        elif isinstance(update, UsageUpdate):
            self.usage = ContextUsage(used=update.used, size=update.size)
            amount = (update.cost or {}).get("amount")
            if isinstance(amount, int | float):
                self.cost_usd = float(amount)
            await self.sink.context_usage(self.usage)

    async def _chunk(self, chunk: MessageChunk) -> None:
        kind = {"agent_message_chunk": "text", "agent_thought_chunk": "thinking"}.get(chunk.session_update)
        if kind is None or not chunk.text:
            return  # the user's own text echoed back, or a block that is not text
        if kind != self._kind or (chunk.message_id is not None and chunk.message_id != self._message_id):
            await self.flush()
            self._kind, self._message_id = kind, chunk.message_id
        self._parts.append(chunk.text)

    async def flush(self) -> None:
        """Write the block the chunks so far make up."""
        if self._kind is None:
            return
        text = "".join(self._parts)
        block: ContentBlock = TextBlock(text) if self._kind == "text" else ThinkingBlock(text)
        if self._kind == "text":
            self.last_text = text
        self._kind, self._message_id, self._parts = None, None, []
        await self._assistant(block)

    async def _assistant(self, block: ContentBlock) -> None:
        message = AssistantMessage(
            message=ApiMessage(content=[block], id=self._api_message_id, model=self.model),
            session_id=self.session_id,
            uuid=str(uuid.uuid4()),
        )
        await self.sink.write(Batch.of([message]))

    async def _tool(self, call: ToolCall) -> None:
        known = await self._known(call)
        # The tool_use waits until the input is settled: until the call runs or has run (its
        # status, or a rawOutput), the agent asks permission for it (`asked`), or the turn ends.
        # claude-agent-acp announces a call pending with rawInput {} and, while the model's input
        # streams, sends it again as far as each complete field, then whole, all still pending and
        # none marked complete: a tool_use written at the first input would lose the rest.
        if known.call.status in RUNNING_STATUSES or known.call.raw_output is not None:
            await self._tool_use(known)
        if known.call.status in TERMINAL_STATUSES and not known.finished:
            known.finished = True
            self.tool_changes += 1
            await self._tool_result(known)

    async def asked(self, tool_call: JsonObject) -> None:
        """The agent asks permission for a call (``tool_call``: the request's, a
        tool_call_update's fields): what it asks about is the call's settled input."""
        fields = {"sessionUpdate": "tool_call_update", **tool_call}
        fields.pop("status", None)  # the request's "pending" is not news of the call
        try:
            call = from_wire(fields, ToolCall)
        except SchemaError:
            return
        await self._tool_use(await self._known(call))

    async def _known(self, call: ToolCall) -> _Tool:
        """The call ``call`` is an update of, with the update applied (its input if it has one)."""
        known = self._tools.get(call.tool_call_id)
        if known is None:
            await self.flush()  # text before a tool call is a block of its own
            known = self._tools[call.tool_call_id] = _Tool(call)
            self.tool_changes += 1
        else:
            known.call = _merge(known.call, call)
        tool_input = _tool_input(call.raw_input)
        if tool_input is not None and not known.written:
            known.input = tool_input
        return known

    async def _tool_result(self, tool: _Tool) -> None:
        """The call's tool_result. A structured result is also written as claude writes one, as
        ``tool_use_result.structuredContent`` (where ``hive agent log`` finds the tool's text); its
        content is then a rawOutput's JSON as the agent sent it, what claude gave the model."""
        raw = tool.call.raw_output
        structured = structured_output(raw)
        content = raw if structured is not None and isinstance(raw, str) else tool_output(tool.call)
        result = ToolResultBlock(
            tool_use_id=tool.call.tool_call_id, content=content, is_error=tool.call.status == "failed"
        )
        extra: JsonObject = {}
        if structured is not None:
            extra["tool_use_result"] = {"content": content, "structuredContent": structured}
        message = UserMessage(
            message=UserContent([result]), session_id=self.session_id, uuid=str(uuid.uuid4()), extra=extra
        )
        await self.sink.write(Batch.of([message]))
        # The next model text is a new API message, as it is for claude after a tool result.
        self._api_message_id = f"msg_{uuid.uuid4().hex[:24]}"

    async def _tool_use(self, tool: _Tool) -> None:
        """The call's tool_use, once. Text still open came after the call started (a call's
        first update ends the text block), so it stays open to follow the tool_use."""
        if tool.written:
            return
        tool.written = True
        block = ToolUseBlock(id=tool.call.tool_call_id, name=tool_name(tool.call), input=tool.input or {})
        await self._assistant(block)

    @property
    def tool_running(self) -> bool:
        """A call has started and not ended (whether or not its tool_use is written yet)."""
        return any(not t.finished for t in self._tools.values())

    async def finish(self, end: Ending) -> ResultMessage:
        """Write the turn's ``result`` as ``end`` says, after any tool_use still held back and any
        block still open."""
        for tool in self._tools.values():
            await self._tool_use(tool)
        await self.flush()
        usage = _claude_usage(end.tokens or {})
        model_usage: dict[str, JsonObject] = {}
        if self.usage is not None and self.usage.size:
            model_usage[self.model or "agent"] = {"contextWindow": self.usage.size, "costUSD": self.cost_usd}
        extra: dict[str, Any] = {"hive": end.hive} if end.hive else {}
        result = ResultMessage(
            subtype=end.subtype,
            is_error=end.is_error,
            session_id=self.session_id,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            num_turns=1,
            total_cost_usd=self.cost_usd,
            usage=usage,
            model_usage=model_usage,
            result=None if end.errors else self.last_text,
            errors=end.errors,
            stop_reason=end.stop_reason,
            terminal_reason=end.terminal_reason,
            uuid=str(uuid.uuid4()),
            extra=extra,
        )
        await self.sink.write(Batch.of([result]))
        return result


def _tool_input(raw: Any) -> JsonObject | None:
    """A rawInput as a tool_use input; None if it says nothing (absent or empty)."""
    if raw is None or (isinstance(raw, dict | list | str) and not raw):
        return None
    return raw if isinstance(raw, dict) else {"input": raw}


def _merge(old: ToolCall, new: ToolCall) -> ToolCall:
    """A tool_call_update patches: fields it leaves out keep their value."""
    changes = {
        field: getattr(new, field)
        for field in ("title", "kind", "status", "content", "locations", "raw_input", "raw_output", "meta")
        if getattr(new, field) is not None
    }
    return attrs.evolve(old, **changes)


def _claude_usage(tokens: JsonObject) -> JsonObject:
    """ACP's prompt usage (an unstable extension) in claude's snake_case names."""

    def count(name: str) -> int:
        value = tokens.get(name)
        return value if isinstance(value, int) else 0

    return {
        "input_tokens": count("inputTokens"),
        "output_tokens": count("outputTokens"),
        "cache_read_input_tokens": count("cachedReadTokens"),
        "cache_creation_input_tokens": count("cachedWriteTokens"),
    }
