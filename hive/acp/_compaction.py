"""Compaction on ACP: the agent's own ``compact`` command when it advertises one, else a
checkpoint turn and a new session. A failed command is not retried and the checkpoint turn
is not run twice, so a compaction always leaves a smaller session behind."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from hive.acp._errors import AcpError
from hive.runtime import Config, StopReason, TurnFailed, TurnOutcome
from hive.sink import Sink

log = logging.getLogger(__name__)

TurnRunner = Callable[[str, Sink, "float | None"], Awaitable[TurnOutcome]]
"""Runs one turn (prompt, sink, idle window or None for the configured one)."""


async def compact(
    turn: TurnRunner,
    archive: Callable[[], Awaitable[None]],
    config: Config,
    commands: list[str],
    sink: Sink,
    *,
    proactive: bool,
) -> None:
    """Compact the session. ``proactive`` (past the watermark): the checkpoint turn runs first."""
    checkpoint = config.compaction.checkpoint_prompt
    if proactive:
        await turn(checkpoint, sink, None)
    if "compact" in commands:
        bound = min(config.compact_idle, config.idle_timeout or config.compact_idle)
        try:
            outcome = await turn("/compact", sink, bound)
        except (AcpError, TurnFailed) as exc:
            log.warning("the agent's compact command failed (%s); archiving the session instead", exc)
        else:
            if outcome.stop_reason is StopReason.COMPLETED and not outcome.is_error:
                return
            log.warning("the agent's compact command did not complete; archiving the session instead")
    if not proactive:
        await turn(checkpoint, sink, None)
    await archive()
