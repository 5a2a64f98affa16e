"""The Runtime contract (hive/runtime/_protocol.py), checked the same way on both backends: for
every way a turn ends, what ``run`` returns or raises, and exactly one ``result`` in the sink."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from hive.runtime import IdleTimeout, Runtime, SessionNotFound, StopReason, TurnFailed, TurnOutcome
from hive.sink import ContextUsage, MemorySink, ResultMessage
from tests.helpers.acp_fake import FakeAcp
from tests.helpers.claude_fake import FakeClaude

GUARD = 30


@attrs.frozen
class Backend:
    """One backend's fake, with the same scenarios scripted in its own terms."""

    name: str
    script: Callable[[str], None]
    runtime: Callable[..., AbstractAsyncContextManager[Runtime]]
    unknown_session: str


def claude_backend(root: Path) -> tuple[Backend, Callable[[], None]]:
    fake = FakeClaude(root).install()
    stops = {"on_signal": {"SIGINT": "interrupt_stream"}}
    scenarios = {
        "answers": [[{"default_turn": True}]],
        "works": [[stops, {"init": {}}, {"text": "working"}, {"sleep": 60}], [{"default_turn": True}]],
        "silent": [[stops, {"init": {}}, {"sleep": 60}]],
    }

    def script(name: str) -> None:
        fake.script(*scenarios[name], sessions=True)

    return Backend("claude", script, fake.runtime, "0b7c1f5e-0000-4000-8000-000000000000"), fake.cleanup


def acp_backend(root: Path) -> tuple[Backend, Callable[[], None]]:
    fake = FakeAcp(root)
    scenarios = {
        "answers": ["default"],
        "works": [[{"thought": "hmm"}, {"text": "working"}, {"sleep": 30}], "default"],
        "silent": [[{"silent": True}]],
    }

    def script(name: str) -> None:
        fake.script(*scenarios[name])

    return Backend("acp", script, fake.runtime, "sess_unknown"), fake.cleanup


@pytest.fixture(params=[claude_backend, acp_backend], ids=["claude", "acp"])
def backend(request: pytest.FixtureRequest, short_tmp: Path) -> Iterator[Backend]:
    made, cleanup = request.param(short_tmp)
    try:
        yield made
    finally:
        cleanup()


def results(sink: MemorySink) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, sink.lines()) if line["type"] == "result"]


async def cancel_after(sink: MemorySink, lines: int, cancel: Callable[[], None]) -> None:
    await sink.wait_for_lines(lines)
    cancel()


async def test_a_turn_the_agent_ends_returns_completed(backend: Backend) -> None:
    backend.script("answers")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with backend.runtime() as runtime:
            outcome = await runtime.run("hello", sink)
    assert (outcome.stop_reason, outcome.is_error, outcome.interrupted) == (
        StopReason.COMPLETED,
        False,
        False,
    )
    assert outcome.session_id == runtime.session_id is not None
    assert len(results(sink)) == 1


async def test_the_canceller_returns_cancelled_and_the_next_turn_runs(backend: Backend) -> None:
    backend.script("works")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with backend.runtime() as runtime:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_after, sink, 2, runtime.canceller().cancel)
                outcome = await runtime.run("go", sink)
            after = await runtime.run("next", MemorySink())
    assert (outcome.stop_reason, outcome.is_error) == (StopReason.CANCELLED, True)
    assert len(results(sink)) == 1
    assert after.stop_reason is StopReason.COMPLETED


async def test_a_cancelled_scope_around_run_raises_cancelled_after_one_result(backend: Backend) -> None:
    backend.script("works")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with backend.runtime() as runtime:
            with trio.CancelScope() as outer:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_after, sink, 2, outer.cancel)
                    await runtime.run("go", sink)
            after = await runtime.run("next", MemorySink())
    assert outer.cancelled_caught
    (result,) = results(sink)
    assert result["is_error"] is True
    assert after.stop_reason is StopReason.COMPLETED


async def test_the_idle_watchdog_raises_idle_timeout_with_the_outcome(backend: Backend) -> None:
    backend.script("silent")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with backend.runtime(idle_timeout=0.5) as runtime:
            with pytest.raises(IdleTimeout) as caught:
                await runtime.run("go", sink)
    outcome = caught.value.outcome
    assert outcome is not None and outcome.stop_reason is StopReason.IDLE and outcome.is_error
    assert len(results(sink)) == 1


async def test_one_turn_at_a_time(backend: Backend) -> None:
    backend.script("works")
    first = MemorySink()
    with trio.fail_after(GUARD):
        async with backend.runtime() as runtime, trio.open_nursery() as nursery:
            nursery.start_soon(runtime.run, "go", first)
            await first.wait_for_lines(2)
            with pytest.raises(TurnFailed, match="already running"):
                await runtime.run("overlap", MemorySink())
            runtime.canceller().cancel()
    assert len(results(first)) == 1


async def test_an_unknown_session_raises_session_not_found(backend: Backend) -> None:
    backend.script("answers")
    with trio.fail_after(GUARD):
        async with backend.runtime(session_id=backend.unknown_session) as runtime:
            with pytest.raises(SessionNotFound, match=f"no session '{backend.unknown_session}'"):
                await runtime.run("go on", MemorySink())


async def test_a_cancelled_scope_around_the_whole_runtime_stops_the_turn_and_raises_cancelled(
    backend: Backend,
) -> None:
    # The scope holds the runtime itself, so its background tasks are cancelled with the turn.
    backend.script("works")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        with trio.CancelScope() as outer:
            async with backend.runtime() as runtime, trio.open_nursery() as nursery:
                nursery.start_soon(cancel_after, sink, 2, outer.cancel)
                await runtime.run("go", sink)
    assert outer.cancelled_caught
    (result,) = results(sink)
    assert result["is_error"] is True


def test_the_outcome_of_a_result_is_what_the_result_says() -> None:
    result = ResultMessage(
        subtype="error_during_execution",
        is_error=True,
        usage={"input_tokens": 3},
        result=None,
        errors=["cut short"],
        extra={"hive": {"synthesized": True}},
    )
    usage = ContextUsage(used=10, size=100)
    outcome = TurnOutcome.of_result(
        result, stop_reason=StopReason.CANCELLED, session_id="s1", usage=usage, interrupted=True
    )
    assert outcome == TurnOutcome(
        stop_reason=StopReason.CANCELLED,
        session_id="s1",
        is_error=True,
        synthesized=True,
        usage=usage,
        tokens={"input_tokens": 3},
        result=None,
        interrupted=True,
        errors=("cut short",),
    )
    agents = TurnOutcome.of_result(
        ResultMessage(subtype="success", is_error=False, result="done"),
        stop_reason=StopReason.COMPLETED,
        session_id=None,
        usage=None,
        interrupted=False,
    )
    assert (agents.synthesized, agents.result, agents.errors, agents.tokens) == (False, "done", (), {})
