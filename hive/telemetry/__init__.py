"""OpenTelemetry traces and metrics of turns, tool calls and bash tasks (see `_setup` for how
the ``OTEL_*`` environment turns them on; where it does not, nothing of it is imported and
nothing is spent: `_state`).

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
    "TurnIds",
    "TurnTrace",
    "active",
    "agent_name",
    "check",
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
    from hive.telemetry._ids import (
        PresetIds,
        TurnIds,
        agent_name,
        new_ids,
        parse_traceparent,
        traceparent,
    )
    from hive.telemetry._setup import Telemetry, TelemetryError, check, configure, install, uninstall
    from hive.telemetry._state import active, wanted
    from hive.telemetry._tasks import (
        TaskTrace,
        queue_depth,
        task_ended,
        task_started,
        wake_acknowledged,
        wake_received,
    )
    from hive.telemetry._trace import NO_TRACE, Trace, exporting, traced_turn, turn_ids
    from hive.telemetry._turns import TurnTrace

export_lazily(__name__)
