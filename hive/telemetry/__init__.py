"""OpenTelemetry traces and metrics of turns, tool calls and bash tasks (see `_setup` for how
the ``OTEL_*`` environment turns them on; nothing is imported or spent where it does not).

Each name is imported from its module on first use.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "NO_TRACE",
    "PresetIds",
    "TaskTrace",
    "Telemetry",
    "TelemetryError",
    "Trace",
    "TurnTrace",
    "TurnIds",
    "active",
    "agent_name",
    "configure",
    "exporting",
    "install",
    "new_ids",
    "parse_traceparent",
    "queue_depth",
    "task_ended",
    "task_started",
    "traced_turn",
    "traceparent",
    "turn_ids",
    "uninstall",
    "wake_acknowledged",
    "wake_received",
    "wanted",
]

if TYPE_CHECKING:
    from hive.telemetry._setup import (
        PresetIds,
        Telemetry,
        TelemetryError,
        TurnIds,
        active,
        agent_name,
        configure,
        exporting,
        install,
        new_ids,
        parse_traceparent,
        traceparent,
        turn_ids,
        uninstall,
        wanted,
    )
    from hive.telemetry._tasks import (
        TaskTrace,
        queue_depth,
        task_ended,
        task_started,
        wake_acknowledged,
        wake_received,
    )
    from hive.telemetry._turns import NO_TRACE, Trace, TurnTrace, traced_turn

export_lazily(__name__)
