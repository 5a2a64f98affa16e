"""A bash task as a span: ``execute_tool bash``, from its start to its end, and the task metrics.

The span is in the trace of the turn whose ``run`` call started it, a child of the span the
call names (its ``_meta.traceparent``: the relay adds the turn's, `hive.bash.relay`). Its own
``traceparent`` rides in the task's wake (`hive.agent_socket.Wake.traceparent`), and the harness links
the turn that carries the wake to it: which task woke which turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from hive.telemetry._ids import remote_context, traceparent
from hive.telemetry._state import active

if TYPE_CHECKING:
    from opentelemetry.trace import Span

_NANOS = 1_000_000_000


@attrs.define(eq=False)
class TaskTrace:
    """The span of one bash task."""

    span: Span

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` of the task's span (its wake carries it)."""
        context = self.span.get_span_context()
        return traceparent(context.trace_id, context.span_id)


def task_started(task_id: str, started_at: float, parent: str | None = None) -> TaskTrace | None:
    """The span of a task that started at ``started_at`` (Unix time), a child of the span the
    ``traceparent`` ``parent`` names (the turn that started it), if any; None where nothing is
    exported."""
    telemetry = active()
    if telemetry is None:
        return None
    from opentelemetry.trace import NonRecordingSpan, SpanKind, set_span_in_context

    parent_context = remote_context(parent) if parent else None
    span = telemetry.tracer.start_span(
        "execute_tool bash",
        context=set_span_in_context(NonRecordingSpan(parent_context)) if parent_context else None,
        kind=SpanKind.INTERNAL,
        start_time=int(started_at * _NANOS),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "bash",
            "hive.bash.task.id": task_id,
        },
    )
    telemetry.instruments.bash_running.add(1)
    return TaskTrace(span)


def task_ended(
    trace: TaskTrace | None, state: str, exit_code: int | None, *, ended_at: float, duration: float | None
) -> None:
    """A task has ended in ``state``: its span ends (if it had one: a task that never ran has
    none), and it is counted."""
    telemetry = active()
    if telemetry is None:
        return
    instruments = telemetry.instruments
    instruments.bash_tasks.add(1, {"hive.bash.task.state": state})
    if duration is not None:
        instruments.bash_task_duration.record(duration, {"hive.bash.task.state": state})
    if trace is None:
        return
    instruments.bash_running.add(-1)
    span = trace.span
    span.set_attribute("hive.bash.task.state", state)
    if exit_code is not None:
        span.set_attribute("hive.bash.task.exit_code", exit_code)
    if state != "done" or exit_code != 0:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, f"{state}, exit code {exit_code}"))
        span.set_attribute("error.type", state if state != "done" else "exit_code")
    span.end(end_time=int(ended_at * _NANOS))


def wake_acknowledged(latency: float) -> None:
    """A task's end reached the agent: ``latency`` seconds after the task ended."""
    telemetry = active()
    if telemetry is not None:
        telemetry.instruments.bash_wake_latency.record(max(0.0, latency))


def wake_received(source: str, depth: int) -> None:
    """The harness took a message for the agent's next turn from ``source`` (``bash``,
    ``subagent``, ``operator``, ...); ``depth`` are waiting now."""
    telemetry = active()
    if telemetry is not None:
        telemetry.instruments.wakes.add(1, {"hive.agent_socket.source": source})
        telemetry.instruments.queue_depth.set(depth)


def queue_depth(depth: int) -> None:
    """``depth`` messages wait for the agent's next turn now."""
    telemetry = active()
    if telemetry is not None:
        telemetry.instruments.queue_depth.set(depth)
