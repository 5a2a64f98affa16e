"""``hive-agent`` stopped (SIGTERM) during a turn of the fake claude, which answers the SIGINT it
is sent as the real CLI may: with its own result (its cost with it), or by exiting without one.
The turn's record and its stream agree on which it was: a result hive made for a claude that gave
none is no result, so the turn's messages are carried again by the next run."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import trio

from hive.agent_socket import Wake, send_wake
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import GUARD, claude_env, claude_start, running_agent, wait_line
from tests.helpers.processes import wait_exited

COST = 0.0042
HELD = [{"init": {}}, {"text": "working"}, {"wait_for_signal": "SIGUSR1"}, {"result": {}}]
RESULT_AFTER_SIGINT = [
    {"user_text": "[Request interrupted by user]"},
    {"result": {"subtype": "error_during_execution", "is_error": True, "total_cost_usd": COST}},
    {"exit": 0},
]
NO_RESULT = [{"exit": 0}]
"""The real CLI's answer to a SIGINT once its model's stream has stalled (no line, exit 0)."""


async def _stopped_during_a_turn(root: Path, fake: FakeClaude, on_sigint: list[Any]) -> dict[str, Any]:
    """A wake's turn, hive-agent stopped by SIGTERM while claude works on it: the turn's record."""
    fake.script(HELD, [{"default_turn": True}], on_signal={"SIGINT": on_sigint})
    async with running_agent(root, claude_env(fake)) as agent:
        await send_wake(agent.socket, Wake("bash-task-a", "1"))
        first = await claude_start(fake, 1)
        await wait_line(agent.state / "turns.jsonl", lambda o: o.get("type") == "assistant")
        agent.process.send_signal(signal.SIGTERM)
        assert await agent.process.wait() == 0, agent.stderr()
    await wait_exited(first["pid"])
    assert fake.signals() == ["SIGINT"]
    (record,) = agent.hive_lines()
    results = [
        o
        for o in map(json.loads, (agent.state / "turns.jsonl").read_bytes().splitlines())
        if o["type"] == "result"
    ]
    return {**record, "results": results}


async def test_claudes_result_after_sigint_makes_the_stopped_turn_delivered_with_its_cost(
    root: Path, fake: FakeClaude
) -> None:
    with trio.fail_after(GUARD):
        record = await _stopped_during_a_turn(root, fake, RESULT_AFTER_SIGINT)
    (result,) = record["results"]
    assert "hive" not in result
    assert (record["outcome"], record["delivered"], record["cost_usd"]) == ("stopped", True, COST), record


async def test_a_claude_that_exits_without_a_result_leaves_the_stopped_turns_messages_to_the_next_run(
    root: Path, fake: FakeClaude
) -> None:
    with trio.fail_after(GUARD):
        record = await _stopped_during_a_turn(root, fake, NO_RESULT)
        (result,) = record["results"]
        assert result["hive"]["synthesized"] is True
        assert "without a result" in result["errors"][0]
        assert (record["outcome"], record["delivered"], record["cost_usd"]) == ("stopped", False, 0.0), record
        async with running_agent(root, claude_env(fake)) as again:
            second = await claude_start(fake, 2)
            await again.hive_line(lambda r: r["turn"] == 2)
    assert second["prompt"] == "[wake from bash-task-a]\n1"
