"""The harness's turn loop in the test's own Trio run, over a scripted runtime, and a raw client of
its agent socket."""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from hive.agent import Harness, SessionStore, open_harness
from hive.runtime import AgentUnavailable, IdleTimeout, SessionNotFound, StopReason, TurnOutcome
from hive.sink import Batch, ContextUsage, Sink

GUARD = 30
"""Seconds a scripted harness may take, from its start to its stop."""

Ending = Literal["complete", "idle", "unavailable", "session_not_found", "fail_after_result"]


@attrs.define(eq=False)
class ScriptedRuntime:
    """A Runtime whose turns end when the test says, and how."""

    session_id: str | None = None
    prompts: list[str] = attrs.field(factory=list)
    compactions: int = 0
    compactions_expected: int = 0
    """What the lockstep test's model has counted."""
    archived: int = 0
    usage: ContextUsage | None = None
    _started: tuple[trio.MemorySendChannel[str], trio.MemoryReceiveChannel[str]] = attrs.field(
        factory=lambda: trio.open_memory_channel[str](math.inf)
    )
    _endings: tuple[trio.MemorySendChannel[Ending], trio.MemoryReceiveChannel[Ending]] = attrs.field(
        factory=lambda: trio.open_memory_channel[Ending](math.inf)
    )
    sessions_made: int = 0

    async def next_prompt(self) -> str:
        return await self._started[1].receive()

    def end(self, ending: Ending = "complete") -> None:
        self._endings[0].send_nowait(ending)

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        self.prompts.append(prompt)
        self._started[0].send_nowait(prompt)
        ending = await self._endings[1].receive()
        if ending == "unavailable":
            raise AgentUnavailable("no such agent: install it, or set HIVE_ACP_COMMAND")
        if ending == "session_not_found":
            raise SessionNotFound(self.session_id or "none")
        if self.session_id is None:
            self.sessions_made += 1
            self.session_id = f"session-{self.sessions_made}"
        lines = [
            {"type": "system", "subtype": "init", "session_id": self.session_id},
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            },
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": "ok",
                "session_id": self.session_id,
            },
        ]
        await sink.write(Batch.of(lines))
        if self.usage is not None:
            await sink.context_usage(self.usage)
        outcome = TurnOutcome(StopReason.COMPLETED, self.session_id, False, result="ok")
        if ending == "idle":
            raise IdleTimeout(
                "the agent sent nothing for 1 s", attrs.evolve(outcome, stop_reason=StopReason.IDLE)
            )
        if ending == "fail_after_result":
            raise AgentUnavailable("the agent went away after its result")
        return outcome

    async def compact(self, sink: Sink) -> None:
        self.compactions += 1
        await sink.write(
            Batch.of([{"type": "result", "subtype": "success", "is_error": False, "result": "compacted"}])
        )

    async def archive(self) -> None:
        self.archived += 1
        self.session_id = None

    def canceller(self) -> Any:
        raise NotImplementedError

    def choices(self) -> Any:
        raise NotImplementedError


@asynccontextmanager
async def serving(
    state_dir: Path, runtime: ScriptedRuntime, *, budget: int = 100_000, **options: Any
) -> AsyncIterator[Harness]:
    sessions = SessionStore(state_dir / "session", "scripted")
    runtime.session_id = sessions.load()
    async with (
        open_harness(runtime, state_dir, sessions, budget=budget, **options) as harness,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(harness.serve)
        yield harness
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def scripted(
    state_dir: Path, runtime: ScriptedRuntime | None = None, **options: Any
) -> AsyncIterator[tuple[Harness, ScriptedRuntime]]:
    """`serving` over ``runtime`` (by default a new `ScriptedRuntime`), the block and the harness's
    stop within `GUARD`."""
    runtime = ScriptedRuntime() if runtime is None else runtime
    with trio.fail_after(GUARD):
        async with serving(state_dir, runtime, **options) as harness:
            yield harness, runtime


class RawClient:
    """Speaks bytes to the agent socket and reads its one-line answers."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buffer = bytearray()

    async def reply(self) -> dict[str, Any] | None:
        """The next answer, or None when the server closes the connection."""
        while (end := self._buffer.find(b"\n")) < 0:
            data = await self.stream.receive_some(65536)
            if not data:
                assert not self._buffer, bytes(self._buffer)
                return None
            self._buffer += data
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def ask(self, data: bytes) -> dict[str, Any] | None:
        await self.stream.send_all(data)
        return await self.reply()


@asynccontextmanager
async def raw_client(path: Path) -> AsyncIterator[RawClient]:
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        yield RawClient(stream)
