"""The seed's tests of stopping a subagent: SIGINT and nothing more, and the stopping slot.

Each test names the wrong implementation it catches, and runs against it too (a parametrised
wrong variant, expected to fail): a test that passed against it would prove nothing.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
import trio

from hive.runtime import AgentProcess
from hive.subagent import NameStopping, _slots
from hive.subagent._slots import Decision, Phase, Slot
from tests.helpers.processes import wait_exited
from tests.helpers.subagents import (
    INTERRUPTED_IN_BASH,
    RecordingHost,
    World,
    serving,
    tool_use_seen,
    turn_done,
    wait_for_slot,
    wait_until,
)

TURN = 60  # seconds: a hang fails the test instead of wedging the run


# -- the wrong implementations --------------------------------------------------------------------


def right(monkeypatch: pytest.MonkeyPatch) -> None:
    """hive as it is."""


def kill_on_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old `force: true` path: a cancel that kills (SIGKILL to the agent's group)."""

    def interrupt(self: AgentProcess) -> bool:
        if self.signalled or self.returncode is not None:
            return False
        os.killpg(self.pid, signal.SIGKILL)
        self.signalled = True
        return True

    monkeypatch.setattr(AgentProcess, "interrupt", interrupt)


def sigint_then_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT on drop, but a kill-on-drop left in place (tokio's `kill_on_drop(true)`): the
    leader is SIGKILLed right after the SIGINT."""

    def interrupt(self: AgentProcess) -> bool:
        if self.signalled or self.returncode is not None:
            return False
        os.killpg(self.pid, signal.SIGINT)
        os.kill(self.pid, signal.SIGKILL)  # as a dropped tokio Child with kill_on_drop does, right after
        self.signalled = True
        return True

    monkeypatch.setattr(AgentProcess, "interrupt", interrupt)


def frees_before_the_signal(monkeypatch: pytest.MonkeyPatch) -> None:
    """`interrupt` frees the name before it signals, on claude as on ACP (the seed's old bug: a
    `continue` could start a second claude on the session while the first was still exiting)."""

    def interrupt(slot: Slot[Any] | None) -> tuple[Slot[Any] | None, Decision[Any]]:
        if slot is None:
            return None, Decision(refused=_slots.Refusal.IDLE)
        return None, Decision(cancel=slot.handle)

    monkeypatch.setattr(_slots, "_interrupt", interrupt)


Variant = Callable[[pytest.MonkeyPatch], None]


def wrong(variant: Variant) -> Any:
    return pytest.param(
        variant, marks=pytest.mark.xfail(strict=True, reason=variant.__doc__), id=variant.__name__
    )


# -- a fake claude that records SIGINT, interrupted -----------------------------------------------


@pytest.mark.parametrize("variant", [right, wrong(kill_on_cancel)])
async def test_an_interrupted_claude_gets_one_sigint_and_ends_its_turn_itself(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: Variant
) -> None:
    """Catches a cancel that kills (the old `force: true` path): the fake records no SIGINT,
    writes no result of its own and dies of SIGKILL."""
    variant(monkeypatch)
    world.claude.script(INTERRUPTED_IN_BASH)
    host = RecordingHost()
    with trio.fail_after(TURN):
        async with serving(world, host=host) as manager:
            manager.start("a", "run the tool", world.caller())
            await wait_until(world, lambda: tool_use_seen(world, "a"))
            done = manager.interrupt("a")
            assert done.sent == "SIGINT"
            assert manager.slots["a"].phase is Phase.STOPPING  # at once, before the turn has ended
            status = await manager.status("a", wait=30)
            (agent,) = host.agents
            code = await agent.wait()
    last = status.views[0].record.last
    assert last is not None and last.stop_reason == "interrupted"
    assert world.claude.signals() == ["SIGINT"]
    assert code == 1  # its own exit, after its own interrupted result
    result = world.log("a")[-1]
    assert result["type"] == "result" and result["terminal_reason"] == "aborted_tools"
    assert "hive" not in result  # claude's own result, not one hive made up
    assert "a" not in manager.slots


# -- an interrupted fake claude that keeps running keeps its name -----------------------------------


@pytest.mark.parametrize("variant", [right, wrong(frees_before_the_signal)])
async def test_an_interrupted_claude_that_keeps_running_keeps_its_name(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: Variant
) -> None:
    """Catches a slot freed before the signal: `continue` is then accepted while the first
    claude is still running on the session."""
    variant(monkeypatch)
    slow_stop = [
        {"record": "stopping slowly"},
        {"wait_for_signal": "SIGUSR1"},
        {"interrupted": "tool"},
        {"exit": 1},
    ]
    world.claude.script(
        [
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 100"}}},
            {"on_signal": {"SIGINT": slow_stop}},
            {"sleep": 600},
        ],
        "default",
    )
    with trio.fail_after(TURN):
        async with serving(world) as manager:
            manager.start("b", "run the tool", world.caller())
            await wait_until(world, lambda: tool_use_seen(world, "b"))
            (pid,) = [start["pid"] for start in world.claude.starts()]
            try:
                assert manager.interrupt("b").sent == "SIGINT"
                await wait_until(world, lambda: world.claude.events("note"))
                # The claude has its SIGINT and is still running: the name stays claimed.
                status = await manager.status("b")
                assert status.views[0].slot is Phase.STOPPING
                with pytest.raises(NameStopping, match="stopping"):
                    manager.continue_("b", "go on", world.caller())
                with pytest.raises(NameStopping):
                    manager.start("b", "anew", world.caller())
                assert manager.interrupt("b").sent is None  # a second interrupt sends nothing
            finally:
                os.kill(pid, signal.SIGUSR1)  # now it ends its turn
            await wait_for_slot(manager, "b", None)
            manager.continue_("b", "go on", world.caller())
            status = await manager.status("b", wait=30)
    last = status.views[0].record.last
    assert last is not None and (last.number, last.stop_reason) == (2, "completed")
    assert world.claude.signals() == ["SIGINT", "SIGUSR1"]
    starts = world.claude.starts()
    assert len(starts) == 2 and starts[1]["session_id"] == starts[0]["session_id"]


# -- a fake ACP agent that records SIGINT, dropped ------------------------------------------------


def sigkill_on_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL in drop instead of SIGINT."""
    kill_on_cancel(monkeypatch)


@pytest.mark.parametrize("variant", [right, wrong(sigkill_on_drop)])
async def test_a_dropped_acp_agent_gets_sigint_and_exits_by_itself(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: Variant
) -> None:
    """Catches SIGKILL on drop: the agent then records no SIGINT and dies of SIGKILL instead of
    exiting through its handler, and its grandchild never hears of it."""
    variant(monkeypatch)
    world.acp.script([{"spawn": "exec sleep 1000"}, {"text": "done"}, {"stop": "end_turn"}])
    host = RecordingHost()
    with trio.fail_after(TURN):
        async with serving(world, host=host) as manager:
            manager.start("c", "spawn something", world.caller(), backend="acp")
            status = await manager.status("c", wait=30)
            (agent,) = host.agents
            code = await agent.wait()  # the turn's end dropped the connection
            (spawned,) = world.acp.events("spawned")
            await wait_exited(spawned["pid"])  # its group's SIGINT reached the grandchild too
    last = status.views[0].record.last
    assert last is not None and (last.stop_reason, last.result) == ("completed", "done")
    assert world.acp.signals() == ["SIGINT"]
    assert code == 130  # exited by its own SIGINT handler, not killed


@pytest.mark.parametrize("variant", [right, wrong(sigkill_on_drop), wrong(sigint_then_kill)])
async def test_a_dropped_acp_agent_that_ignores_sigint_is_left_running(
    world: World, monkeypatch: pytest.MonkeyPatch, variant: Variant
) -> None:
    """Catches SIGKILL on drop, and SIGINT on drop with a kill-on-drop left in place: an agent
    that ignores its SIGINT is then killed rather than left running (and said so)."""
    variant(monkeypatch)
    world.acp.script("default", on_signal={"SIGINT": "ignore"}, on_eof="linger")
    host = RecordingHost()
    with trio.fail_after(TURN):
        async with serving(world, host=host) as manager:
            manager.start("i", "hello", world.caller(), backend="acp")
            status = await manager.status("i", wait=30)
            (agent,) = host.agents
            await wait_for_slot(manager, "i", None)
            await manager.status("i", wait=30)
            await turn_done(manager, "i")  # the turn's task, drop included, is done
            assert manager.live.get("i") is None
            alive_after_the_drop = agent.returncode is None
            signals = world.acp.signals()
            if alive_after_the_drop:
                os.kill(agent.pid, signal.SIGTERM)  # the test's own cleanup: its SIGTERM exits it
                await agent.wait()
    last = status.views[0].record.last
    assert last is not None and last.stop_reason == "completed"
    assert signals == ["SIGINT"]
    assert alive_after_the_drop
