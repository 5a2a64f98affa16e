"""Trace and span ids, and the W3C ``traceparent`` that names them: what an agent's environment,
a wake, a link and a bash ``run`` call carry. Standard library only (``secrets`` is imported
where ids are drawn, OpenTelemetry where a span's parent or link is made of a ``traceparent``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext


def traceparent(trace_id: int, span_id: int) -> str:
    """The W3C ``traceparent`` of a sampled span."""
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def parse_traceparent(value: str) -> tuple[int, int] | None:
    """The trace and span ids of a W3C ``traceparent``; None for one that is not well formed."""
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
    except ValueError:
        return None
    return (trace_id, span_id) if trace_id and span_id else None


def remote_context(value: str) -> SpanContext | None:
    """The span a ``traceparent`` names, as another process's (a parent, a link); None for one
    that is not well formed."""
    from opentelemetry.trace import SpanContext, TraceFlags

    ids = parse_traceparent(value)
    if ids is None:
        return None
    return SpanContext(ids[0], ids[1], is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def new_ids() -> tuple[int, int]:
    """A trace id and a span id, drawn as the SDK draws them."""
    import secrets

    return secrets.randbits(128) or 1, secrets.randbits(64) or 1


class PresetIds:
    """The SDK's id generator, but the next span's ids may be chosen beforehand: `hive run`
    names its turn's span in the agent's ``TRACEPARENT`` before it spawns the agent, and before
    it has imported the SDK."""

    def __init__(self) -> None:
        self._trace: int | None = None
        self._span: int | None = None

    def preset(self, trace_id: int, span_id: int) -> None:
        """The next span started gets these ids (its trace id only if it has no parent)."""
        self._trace, self._span = trace_id, span_id

    def clear(self) -> None:
        """Forget what `preset` chose and was not used (a span with a parent keeps its trace id)."""
        self._trace = self._span = None

    def generate_trace_id(self) -> int:
        """The preset trace id, once; else a random one."""
        trace_id, self._trace = self._trace, None
        return trace_id if trace_id is not None else new_ids()[0]

    def generate_span_id(self) -> int:
        """The preset span id, once; else a random one."""
        span_id, self._span = self._span, None
        return span_id if span_id is not None else new_ids()[1]

    def is_trace_id_random(self) -> bool:
        """Whether trace ids are random (W3C's sampling may rely on it): they are."""
        return True


class TurnIds(NamedTuple):
    """The ids a turn's span will have, chosen before the agent is spawned (`hive run`), and
    the ``traceparent`` it runs under, if its own environment named one."""

    trace_id: int
    span_id: int
    parent: str | None

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` that names the turn's span."""
        return traceparent(self.trace_id, self.span_id)


def agent_name(given: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The agent's name in its telemetry: ``given`` (--name), else ``HIVE_AGENT_NAME``, else
    the state directory's base name."""
    from hive._limits import state_dir_path

    return (
        given
        or environ.get("HIVE_AGENT_NAME")
        or os.path.basename(state_dir_path(environ).rstrip("/"))
        or "hive"
    )
