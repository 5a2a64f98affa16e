"""Delivery of owed wakes to the agent socket: at least once, in order, with backoff while it is away.

The sending is :class:`hive.wake.WakeCourier`'s (the subagent daemon's too); this holds the one
agent socket the bash daemon tells, and keys the wakes by task id and serial.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from hive.wake import Wake
from hive.wake import WakeCourier as Sender

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
    _sender: Sender[Key] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._sender = Sender(self.retry_initial, self.retry_max, self.reply_timeout)

    @property
    def delivered(self) -> int:
        return self._sender.delivered

    def enqueue(self, task_id: str, serial: str, wake: Wake) -> None:
        self._sender.send((task_id, serial), self.agent_socket, wake)

    def withdraw(self, task_id: str, serial: str) -> None:
        self._sender.withdraw((task_id, serial))

    def pending(self) -> list[Key]:
        return self._sender.pending()

    async def run(  # noqa: ASYNC128 - the sender it runs calls started()
        self, on_acked: OnAcked, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async def acked(key: Key) -> None:
            await on_acked(*key)

        await self._sender.run(acked, task_status=task_status)
