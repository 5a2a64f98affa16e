"""Wakes to the parent agents' sockets: each at least once, in order per socket, with backoff while
a socket is away (:class:`hive.wake.WakeCourier`, the bash daemon's courier too: a socket nobody
listens on never holds up the wakes to another)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive.wake import Wake
from hive.wake import WakeCourier as Sender


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
    """Sends each wake until its agent socket acknowledges it; ``on_acked(key)`` then."""

    on_acked: Callable[[str], None]
    retry_initial: float = 0.05
    retry_max: float = 5.0
    reply_timeout: float = 30.0
    _sender: Sender[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._sender = Sender(self.retry_initial, self.retry_max, self.reply_timeout)

    def send(self, key: str, socket: Path, wake: Wake) -> None:
        self._sender.send(key, socket, wake)

    def withdraw(self, key: str) -> None:
        self._sender.withdraw(key)

    def pending(self) -> list[str]:
        return self._sender.pending()

    async def run(  # noqa: ASYNC128 - the sender it runs calls started()
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async def acked(key: str) -> None:
            self.on_acked(key)

        await self._sender.run(acked, task_status=task_status)
