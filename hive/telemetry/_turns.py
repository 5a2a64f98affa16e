"""A turn as a span, as the OpenTelemetry GenAI conventions name it: ``invoke_agent <agent>``,
with a child ``execute_tool <tool>`` for each tool call its stream shows (from its ``tool_use``
to its ``tool_result``), the attributes the stream gives (model, session, tokens, finish
reason) and hive's own (``hive.hive_run.*``); and the turn's metrics.

The span is the current one while the turn runs, and the agents the turn spawns get its
``TRACEPARENT`` (`hive.runtime.agent_environment`): claude's own spans nest under it.

The stream is read as it passes to the turn's sink: only the lines that can matter (a
``system`` init, an assistant's tool use, a tool result, the result, a model the span has not
named yet) are parsed, found by a byte search of the batch. This module is imported only where telemetry is exported
(`hive.telemetry._trace`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import attrs

from hive.runtime import agent_environment
from hive.sink import (
    AssistantMessage,
    Batch,
    ContextUsage,
    MessageError,
    ResultMessage,
    SessionCost,
    SystemInit,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    TurnCost,
    UserMessage,
    parse_line,
)
from hive.telemetry._ids import remote_context, traceparent
from hive.telemetry._setup import Telemetry

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from hive.runtime import TurnOutcome
    from hive.sink import Sink

log = logging.getLogger(__name__)

_MATTERS = (b'"init"', b'"tool_use"', b'"tool_result"', b'"result"', b"compact_boundary")
"""What a line that can change the span holds (a line spelt with escapes is parsed anyway)."""
_MODEL = b'"model":"'
"""How the stream names a model: a line naming one other than the answer's so far is parsed."""


@attrs.define(eq=False)
class TurnTrace:
    """The span of one turn, kept up to date from the turn's stream."""

    telemetry: Telemetry
    span: Span
    agent: str
    provider: str
    """``gen_ai.provider.name``: anthropic or acp, and an ACP agent's own name once its stream says it."""
    started: float
    """`time.perf_counter` (not Unix time) when the span started: the turn's duration counts from it."""
    model: str | None = None
    """The model the stream's init line names."""
    outcome: str | None = None
    """``hive.hive_run.outcome`` once the turn has ended."""
    result: ResultMessage | None = None
    """The stream's result line: its tokens go to the metrics."""
    cost: TurnCost = attrs.field(factory=TurnCost)
    """What the turn's result lines say it cost, measured from its session's cost before it
    (the results say what the session has cost so far)."""
    _tools: dict[str, Span] = attrs.field(factory=dict)
    _answered_by: bytes | None = None
    """``gen_ai.response.model`` as the stream spells it (``"model":"<name>"``), once set."""

    def sink(self, inner: Sink) -> Sink:
        """``inner``, its batches seen on the way to keep the span up to date."""
        return _TracingSink(inner, self)

    def ended(self, outcome: TurnOutcome) -> None:
        """Record how the turn ended: its outcome, its session, an error status if it did not complete."""
        reason = outcome.stop_reason.value
        self.outcome = "error" if reason == "completed" and outcome.is_error else reason
        self.span.set_attribute("hive.hive_run.outcome", self.outcome)
        if outcome.session_id:
            self.span.set_attribute("gen_ai.conversation.id", outcome.session_id)
        if outcome.is_error or reason != "completed":
            from opentelemetry.trace import Status, StatusCode

            self.span.set_status(Status(StatusCode.ERROR, "; ".join(outcome.errors) or f"the turn {reason}"))
            self.span.set_attribute("error.type", "error" if reason == "completed" else reason)

    # -- the stream --------------------------------------------------------------------------------

    def observe(self, batch: Batch) -> None:
        """Update the span from a batch of the stream: only the lines that can matter are parsed."""
        data = batch.data
        if not self._matters(data):
            return
        for line in batch.lines():
            if self._matters(line):
                try:
                    self._message(parse_line(line))
                except MessageError:
                    continue

    def _matters(self, data: bytes) -> bool:
        """Whether ``data`` (a batch, or a line of it) holds what can change the span."""
        if any(mark in data for mark in _MATTERS) or b"\\u" in data:
            return True
        named = data.count(_MODEL)
        return named > 0 and (self._answered_by is None or named > data.count(self._answered_by))

    def _message(self, message: object) -> None:
        span = self.span
        match message:
            case SystemInit(session_id=session, model=model, extra=extra):
                span.set_attribute("gen_ai.conversation.id", session)
                if model:
                    self.model = model
                    span.set_attribute("gen_ai.request.model", model)
                if extra.get("runtime") == "acp":
                    agent = extra.get("agent")
                    name = agent.get("name") if isinstance(agent, dict) else None
                    self.provider = str(name) if name else "acp"
                    span.set_attribute("gen_ai.provider.name", self.provider)
            case SystemMessage(subtype="compact_boundary"):
                span.set_attribute("hive.hive_run.compacted", True)
            case AssistantMessage(message=api):
                if api.model and api.model != "<synthetic>":
                    span.set_attribute("gen_ai.response.model", api.model)
                    self._answered_by = _MODEL + api.model.encode() + b'"'
                for block in api.content:
                    if isinstance(block, ToolUseBlock):
                        self._tool_started(block)
            case UserMessage(message=user) if not isinstance(user.content, str):
                for block in user.content:
                    if isinstance(block, ToolResultBlock):
                        self._tool_ended(block.tool_use_id, error=bool(block.is_error))
            case ResultMessage():
                self.result = message
                self._result(message)

    def _tool_started(self, block: ToolUseBlock) -> None:
        if block.id in self._tools:
            return
        from opentelemetry.trace import SpanKind, set_span_in_context

        self._tools[block.id] = self.telemetry.tracer.start_span(
            f"execute_tool {block.name}",
            context=set_span_in_context(self.span),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": block.name,
                "gen_ai.tool.call.id": block.id,
            },
        )

    def _tool_ended(self, call_id: str, *, error: bool, why: str = "the tool's result is an error") -> None:
        span = self._tools.pop(call_id, None)
        if span is None:
            return
        if error:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, why))
            span.set_attribute("error.type", "tool_error" if why.startswith("the tool") else "unfinished")
        span.end()

    def _result(self, result: ResultMessage) -> None:
        span = self.span
        if result.session_id:
            span.set_attribute("gen_ai.conversation.id", result.session_id)
        for attribute, value in _token_attributes(result.usage).items():
            span.set_attribute(attribute, value)
        if result.stop_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [result.stop_reason])
        self.cost.result(result.session_id, result.total_cost_usd)
        if self.cost.usd:
            span.set_attribute("hive.hive_run.cost_usd", self.cost.usd)

    # -- the end ----------------------------------------------------------------------------------

    def finish(self, error: BaseException | None = None) -> None:
        """End the tool spans still open, then the turn's span, and record the turn's metrics. A
        turn that neither raised nor was told `ended` (a compaction: it has no outcome of its
        own to tell) completed."""
        for call_id in list(self._tools):
            self._tool_ended(call_id, error=True, why="the turn ended before the tool's result")
        span = self.span
        if error is None and self.outcome is None:
            self.outcome = "completed"
            span.set_attribute("hive.hive_run.outcome", self.outcome)
        if error is not None:
            cancelled = type(error).__name__ == "Cancelled"
            self.outcome = "stopped" if cancelled else "failed"
            span.set_attribute("hive.hive_run.outcome", self.outcome)
            span.set_attribute("error.type", self.outcome if cancelled else type(error).__qualname__)
            if not cancelled:
                span.record_exception(error)
            from opentelemetry.trace import Status, StatusCode

            span.set_status(
                Status(StatusCode.ERROR, f"the turn {self.outcome}: {error}" if not cancelled else "stopped")
            )
        span.end()
        self._measure(time.perf_counter() - self.started)

    def _measure(self, seconds: float) -> None:
        instruments = self.telemetry.instruments
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider,
            "gen_ai.agent.name": self.agent,
        }
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        outcome = self.outcome or "completed"
        if outcome != "completed":
            attributes["error.type"] = outcome
        instruments.operation_duration.record(seconds, attributes)
        instruments.turns.add(1, {"hive.hive_run.outcome": outcome, "gen_ai.agent.name": self.agent})
        result = self.result
        if result is None:
            return
        tokens = _token_attributes(result.usage)
        for attribute, kind in (
            ("gen_ai.usage.input_tokens", "input"),
            ("gen_ai.usage.output_tokens", "output"),
        ):
            if attribute in tokens:
                instruments.token_usage.record(tokens[attribute], {**attributes, "gen_ai.token.type": kind})
        if self.cost.usd:
            instruments.turn_cost.add(self.cost.usd, {"gen_ai.agent.name": self.agent})


def _token_attributes(usage: dict[str, Any]) -> dict[str, int]:
    """The GenAI conventions' token attributes of a result's ``usage``: the input tokens count
    the cached ones too (claude's ``input_tokens`` leaves out the cache reads and writes, which
    are also given on their own)."""
    counts = {
        key: value
        for key, value in usage.items()
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
    }
    found = {
        attribute: counts[key]
        for key, attribute in (
            ("output_tokens", "gen_ai.usage.output_tokens"),
            ("cache_read_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
            ("cache_creation_input_tokens", "gen_ai.usage.cache_creation.input_tokens"),
        )
        if key in counts
    }
    if "input_tokens" in counts:
        found["gen_ai.usage.input_tokens"] = (
            counts["input_tokens"]
            + counts.get("cache_read_input_tokens", 0)
            + counts.get("cache_creation_input_tokens", 0)
        )
    return found


@attrs.define(eq=False)
class _TracingSink:
    inner: Sink
    trace: TurnTrace

    async def write(self, batch: Batch) -> None:
        try:
            self.trace.observe(batch)
        except Exception:  # the turn goes on whatever its telemetry makes of a line
            log.exception("telemetry: cannot read a batch of the turn's stream")
        await self.inner.write(batch)

    async def context_usage(self, usage: ContextUsage) -> None:
        await self.inner.context_usage(usage)

    def __getattr__(self, name: str) -> Any:
        # What the turn's own sink offers beyond the protocol (`saw_result`, `usage`, ...).
        return getattr(self.inner, name)


@contextmanager
def start_turn(
    telemetry: Telemetry,
    agent: str,
    *,
    provider: str,
    number: int | None,
    trigger: str | None,
    kind: str,
    links: Sequence[str],
    parent: str | None,
    cost: SessionCost | None,
) -> Iterator[TurnTrace]:
    """The span of one turn (see `hive.telemetry._trace.traced_turn`)."""
    from opentelemetry import trace as api
    from opentelemetry.trace import Link, NonRecordingSpan, SpanKind

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.provider.name": provider,
        "hive.hive_run.kind": kind,
    }
    if number is not None:
        attributes["hive.hive_run.number"] = number
    if trigger:
        attributes["hive.hive_run.trigger"] = trigger
    parent_context = remote_context(parent) if parent else None
    span = telemetry.tracer.start_span(
        f"invoke_agent {agent}",
        context=api.set_span_in_context(NonRecordingSpan(parent_context)) if parent_context else None,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        links=[Link(c) for c in map(remote_context, links) if c is not None],
    )
    telemetry.ids.clear()
    turn = TurnTrace(
        telemetry, span, agent, provider, time.perf_counter(), cost=TurnCost(cost or SessionCost())
    )
    context = span.get_span_context()
    added = {"TRACEPARENT": traceparent(context.trace_id, context.span_id)}
    if context.trace_state:
        added["TRACESTATE"] = context.trace_state.to_header()
    error: BaseException | None = None
    try:
        with (
            api.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False),
            agent_environment(added),
        ):
            yield turn
    except BaseException as exc:
        error = exc
        raise
    finally:
        turn.finish(error)
