"""A stand-in for the harness on the agent socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from hive.agent_socket import AgentRequest, Wake, serve_agent_socket


@attrs.define
class AgentListener:
    """A stand-in for the harness: serves the agent socket and collects the wakes it is sent."""

    path: Path
    wakes: list[Wake] = attrs.field(factory=list)
    _arrived: trio.Event = attrs.field(factory=trio.Event)
    refuse: bool = False

    refusals: int = 0

    async def _take(self, request: AgentRequest) -> None:
        if self.refuse:
            self.refusals += 1
            self._signal()
            raise RuntimeError("refusing on purpose")
        if isinstance(request, Wake):
            self.wakes.append(request)
            self._signal()

    def _signal(self) -> None:
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait_for_refusals(self, count: int) -> None:
        """Wait until ``count`` wakes have been refused in all."""
        while self.refusals < count:
            await self._arrived.wait()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Serve the agent socket for the duration of the block."""
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, self.path, self._take)
            yield
            nursery.cancel_scope.cancel()

    async def wait_for(self, count: int) -> list[Wake]:
        """Wait until ``count`` wakes have arrived in all."""
        while len(self.wakes) < count:
            await self._arrived.wait()
        return self.wakes

    async def only_wake(self, sender: str) -> Wake:
        """The one wake that arrives (within 20 s), which must be from ``sender``."""
        with trio.fail_after(20):
            (wake,) = await self.wait_for(1)
        assert wake.sender == sender, wake
        return wake

    async def wait_for_ends(self, end_ids: set[str]) -> None:
        """Wait until a wake has arrived for each of ``end_ids``."""
        while not end_ids <= {w.end_id for w in self.wakes}:
            await self.wait_for(len(self.wakes) + 1)

    def senders(self) -> list[str]:
        """Who sent each wake, in order of arrival."""
        return [w.sender for w in self.wakes]
