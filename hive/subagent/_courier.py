"""Wakes to the parent agents' sockets: each at least once, in order per socket, with backoff while
a socket is away (:class:`hive.wake.WakeCourier`, the bash daemon's courier too: a socket nobody
listens on never holds up the wakes to another). What is the subagent daemon's own: what its
manager needs of a courier (so tests can hand it a fake), and its wakes keyed by ``<name>:<turn>``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from hive.wake import Wake, WakeCourier


class Courier(Protocol):
    def send(self, key: str, socket: Path, wake: Wake) -> None:
        """Deliver ``wake`` to ``socket`` (in the background); ``key`` names it for ``withdraw``."""
        ...

    def withdraw(self, key: str) -> None:
        """Do not send it after all (the caller has seen the end it tells of)."""
        ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


def wake_courier(on_acked: Callable[[str], None]) -> Courier:
    """The courier of a subagent daemon: ``on_acked(key)`` once a wake is acknowledged."""
    return WakeCourier[str](on_acked=on_acked)
