"""Wakes to the parent agent's socket: each at least once, in order, with backoff while it is away."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive.wake import AgentRequestError, Wake, WakeRefused, send_wake

log = logging.getLogger(__name__)


class Courier(Protocol):
    def send(self, key: str, socket: Path, wake: Wake) -> None:
        """Deliver ``wake`` to ``socket`` (in the background); ``key`` names it for ``withdraw``."""
        ...

    def withdraw(self, key: str) -> None:
        """Do not send it after all (the caller has seen the end it tells of)."""
        ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


@attrs.define(eq=False)
class WakeCourier:
    """Sends each wake until the agent socket acknowledges it; ``on_acked(key)`` then."""

    on_acked: Callable[[str], None]
    retry_initial: float = 0.05
    retry_max: float = 5.0
    reply_timeout: float = 30.0
    _pending: dict[str, tuple[Path, Wake]] = attrs.field(factory=dict)
    _work: trio.Event = attrs.field(factory=trio.Event)

    def send(self, key: str, socket: Path, wake: Wake) -> None:
        self._pending[key] = (socket, wake)
        self._work.set()

    def withdraw(self, key: str) -> None:
        self._pending.pop(key, None)

    def pending(self) -> list[str]:
        return list(self._pending)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        delay = self.retry_initial
        while True:
            if not self._pending:
                self._work = trio.Event()
                await self._work.wait()
            key, (socket, wake) = next(iter(self._pending.items()))
            try:
                with trio.fail_after(self.reply_timeout if self.reply_timeout > 0 else math.inf):
                    await send_wake(socket, wake)
            except (
                OSError,
                trio.BrokenResourceError,
                trio.TooSlowError,
                AgentRequestError,
                WakeRefused,
            ) as exc:
                log.info("agent socket %s unavailable (%s); retrying in %.2f s", socket, exc, delay)
                # The next try starts from the oldest wake again (order is kept).
                await trio.sleep(delay)
                delay = min(self.retry_max, delay * 2)
                continue
            delay = self.retry_initial
            if self._pending.get(key, (None, None))[1] is wake:
                del self._pending[key]
            self.on_acked(key)
