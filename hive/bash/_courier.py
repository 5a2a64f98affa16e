"""Delivery of owed wakes to the agent socket: at least once, in order, with backoff while it is away."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from hive.wake import AgentRequestError, Wake, WakeRefused, open_agent_connection

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (task id, serial)
OnAcked = Callable[[str, str], Awaitable[None]]


@attrs.define(eq=False)
class WakeCourier:
    """Holds the wakes not yet acknowledged and sends them whenever the agent socket answers.

    With no agent socket configured nothing is sent, and the loose ends on disk stay as
    the record of what the agent is owed.
    """

    agent_socket: Path | None
    retry_initial: float = 0.05
    retry_max: float = 5.0
    reply_timeout: float = 30.0
    _pending: dict[Key, Wake] = attrs.field(factory=dict)
    _work: trio.Event = attrs.field(factory=trio.Event)
    delivered: int = 0

    def enqueue(self, task_id: str, serial: str, wake: Wake) -> None:
        self._pending[(task_id, serial)] = wake
        self._work.set()

    def withdraw(self, task_id: str, serial: str) -> None:
        self._pending.pop((task_id, serial), None)

    def pending(self) -> list[Key]:
        return list(self._pending)

    async def run(
        self, on_acked: OnAcked, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        if self.agent_socket is None:
            await trio.sleep_forever()
        delay = self.retry_initial
        while True:
            if not self._pending:
                self._work = trio.Event()
                await self._work.wait()
            try:
                await self._deliver_all(on_acked)
            except (
                OSError,
                trio.BrokenResourceError,
                trio.TooSlowError,
                AgentRequestError,
                WakeRefused,
            ) as exc:
                log.info(
                    "agent socket %s unavailable (%s); retrying in %.2f s", self.agent_socket, exc, delay
                )
                await trio.sleep(delay)
                delay = min(self.retry_max, delay * 2)
            else:
                delay = self.retry_initial

    async def _deliver_all(self, on_acked: OnAcked) -> None:
        assert self.agent_socket is not None
        async with open_agent_connection(self.agent_socket) as conn:
            while self._pending:
                key, wake = next(iter(self._pending.items()))
                with trio.fail_after(self.reply_timeout if self.reply_timeout > 0 else math.inf):
                    await conn.wake(wake)
                # Withdrawn meanwhile (a status call told the agent): nothing left to do.
                if self._pending.get(key) is wake:
                    del self._pending[key]
                self.delivered += 1
                await on_acked(*key)
