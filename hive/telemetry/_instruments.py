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
    """``hive.turns``: turns ended, by ``hive.turn.outcome``."""
    turn_cost: Counter
    """``hive.turn.cost``: what turns cost, in USD, where the agent's stream says."""
    wakes: Counter
    """``hive.wakes``: wakes that reached the harness, by ``hive.wake.source``."""
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
        return cls(
            token_usage=meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
            ),
            operation_duration=meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            ),
            turns=meter.create_counter("hive.turns", unit="{turn}", description="Turns ended, by outcome."),
            turn_cost=meter.create_counter("hive.turn.cost", unit="USD", description="What turns cost."),
            wakes=meter.create_counter("hive.wakes", unit="{wake}", description="Wakes received, by source."),
            queue_depth=meter.create_gauge(
                "hive.queue.depth", unit="{message}", description="Messages waiting for the next turn."
            ),
            bash_tasks=meter.create_counter(
                "hive.bash.tasks", unit="{task}", description="Bash tasks ended, by final state."
            ),
            bash_task_duration=meter.create_histogram(
                "hive.bash.task.duration",
                unit="s",
                description="How long bash tasks ran.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            ),
            bash_running=meter.create_up_down_counter(
                "hive.bash.running", unit="{task}", description="Bash tasks running now."
            ),
            bash_wake_latency=meter.create_histogram(
                "hive.bash.wake.latency",
                unit="s",
                description="From a bash task's end to the acknowledgement of its wake.",
            ),
        )
