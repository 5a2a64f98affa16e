"""The metrics hive records: the GenAI conventions' two, and hive's own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter


class Gauge(Protocol):
    """A synchronous gauge (the API's class for one is private)."""

    def set(self, amount: float, attributes: Any = None, context: Any = None) -> None: ...


# The buckets the GenAI semantic conventions advise for these two histograms.
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)


@attrs.frozen
class Instruments:
    token_usage: Histogram
    """``gen_ai.client.token.usage``: a turn's tokens, by ``gen_ai.token.type`` (input, output)."""
    operation_duration: Histogram
    """``gen_ai.client.operation.duration``: a turn's wall time, in seconds."""
    turns: Counter
    """``hive.turns``: turns ended, by ``hive.hive_run.outcome``."""
    turn_cost: Counter
    """``hive.hive_run.cost``: what turns cost, in USD, where the agent's stream says."""
    wakes: Counter
    """``hive.wakes``: wakes that reached the harness, by ``hive.agent_socket.source``."""
    queue_depth: Gauge
    """``hive.queue.depth``: the messages waiting for the agent's next turn."""
    bash_tasks: Counter
    """``hive.bash.tasks``: bash tasks ended, by ``hive.bash.task.state``."""
    bash_task_duration: Histogram
    """``hive.bash.task.duration``: how long bash tasks ran, in seconds."""
    bash_running: UpDownCounter
    """``hive.bash.running``: bash tasks running now."""
    bash_wake_latency: Histogram
    """``hive.bash.wake.latency``: from a task's end to its wake's acknowledgement, in seconds."""

    @classmethod
    def create(cls, meter: Meter) -> Instruments:
        """Each instrument, made on ``meter`` as `_MADE` says."""
        made: dict[str, Any] = {}
        for field in attrs.fields(cls):
            name, unit, description = _MADE[field.name]
            advice = {}
            if field.name in _BUCKETS:
                advice["explicit_bucket_boundaries_advisory"] = list(_BUCKETS[field.name])
            create = getattr(meter, _CREATE[str(field.type)])
            made[field.name] = create(name, unit=unit, description=description, **advice)
        return cls(**made)


_MADE = {
    "token_usage": ("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used."),
    "operation_duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration."),
    "turns": ("hive.turns", "{turn}", "Turns ended, by outcome."),
    "turn_cost": ("hive.hive_run.cost", "USD", "What turns cost."),
    "wakes": ("hive.wakes", "{wake}", "Wakes received, by source."),
    "queue_depth": ("hive.queue.depth", "{message}", "Messages waiting for the next turn."),
    "bash_tasks": ("hive.bash.tasks", "{task}", "Bash tasks ended, by final state."),
    "bash_task_duration": ("hive.bash.task.duration", "s", "How long bash tasks ran."),
    "bash_running": ("hive.bash.running", "{task}", "Bash tasks running now."),
    "bash_wake_latency": ("hive.bash.wake.latency", "s", "From a bash task's end to its wake's receipt."),
}
"""Each instrument's name, unit and description, by its field in `Instruments`."""
_BUCKETS = {
    "token_usage": TOKEN_BUCKETS,
    "operation_duration": DURATION_BUCKETS,
    "bash_task_duration": DURATION_BUCKETS,
}
"""The buckets advised for a histogram, where it has any."""
_CREATE = {
    "Histogram": "create_histogram",
    "Counter": "create_counter",
    "Gauge": "create_gauge",
    "UpDownCounter": "create_up_down_counter",
}
"""The `Meter` method that makes an instrument of each type."""
