"""A turn's cost is its own, though the agents report a session's cost so far: through a real
``hive-agent`` on the fake claude and on the ACP fixture, over several turns, a compaction and a
restart, the turn log, ``hive agent status`` and ``hive ls --json`` say the same per-turn costs,
and they add up to the session's cost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from fixtures import acp_agent
from hive.agent_socket import Compact, Prompt, open_agent_connection
from hive.fleet._history import Histories
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import (
    GUARD,
    Agent,
    acp_env,
    claude_env,
    running_agent,
)

SESSION_COSTS = (0.25, 0.5, 0.625, 1.0)
"""What the session has cost after each turn, as the agent reports it (exact in binary)."""
TURN_COSTS = [0.25, 0.25, 0.125, 0.375]


async def _ask(agent: Agent, request: Prompt | Compact, turn: int) -> None:
    async with open_agent_connection(agent.socket) as connection:
        await connection.request(request)
    await agent.hive_line(lambda r: r["turn"] == turn)


async def _hive(*args: str) -> Any:
    done = await trio.run_process([sys.executable, "-m", "hive.cli", *args], capture_stdout=True)
    return json.loads(done.stdout)


async def _run(root: Path, env: dict[str, str], steps: list[Prompt | Compact]) -> None:
    """``steps`` as turns 1, 2, ...; the harness restarted before the last."""
    *before, last = steps
    async with running_agent(root, env) as agent:
        for turn, step in enumerate(before, 1):
            await _ask(agent, step, turn)
    async with running_agent(root, env) as agent:
        await _ask(agent, last, len(steps))
        state = str(agent.state)
        status = await _hive("agent", "status", "--json", "--state-dir", state)
        listed = await _hive("ls", "--json", state)
    records = agent.hive_lines()
    assert [
        p.cost for p in Histories().points(agent.state / "turns.jsonl")
    ] == TURN_COSTS  # the web page's chart
    assert [r["cost_usd"] for r in records] == TURN_COSTS
    assert [r["session_cost_usd"] for r in records] == list(SESSION_COSTS)
    assert sum(TURN_COSTS) == SESSION_COSTS[-1]
    assert len({r["session_id"] for r in records}) == 1
    for shown in (status, listed):
        assert (shown["last_cost_usd"], shown["session_cost_usd"]) == (TURN_COSTS[-1], SESSION_COSTS[-1])
        assert shown["last_tokens"] == records[-1]["tokens"]


async def test_claude_turns_cost_each_their_own_across_a_compaction_and_a_restart(
    root: Path, fake: FakeClaude
) -> None:
    def turn(cost: float, tokens: int) -> list[dict[str, Any]]:
        usage = {"input_tokens": tokens, "output_tokens": 1}
        return [{"init": {}}, {"text": "ok"}, {"result": {"total_cost_usd": cost, "usage": usage}}]

    fake.script(*(turn(cost, 10 * n) for n, cost in enumerate(SESSION_COSTS, 1)))
    with trio.fail_after(GUARD):
        await _run(root, claude_env(fake), [Prompt("one"), Prompt("two"), Compact(), Prompt("three")])


async def test_acp_turns_cost_each_their_own_across_a_restart(root: Path) -> None:
    def turn(cost: float, tokens: int) -> list[dict[str, Any]]:
        return [
            {"text": "ok"},
            {"usage": {"used": 1000, "size": 200000, "cost": {"amount": cost, "currency": "USD"}}},
            {
                "stop": "end_turn",
                "usage": {"inputTokens": tokens, "outputTokens": 1, "totalTokens": tokens + 1},
            },
        ]

    env = acp_env(root, [])
    acp_agent.write_script(
        root / "acp-script.json",
        [turn(cost, 10 * n) for n, cost in enumerate(SESSION_COSTS, 1)],
        count_turns="state",
    )
    with trio.fail_after(GUARD):
        await _run(root, env, [Prompt("one"), Prompt("two"), Prompt("three"), Prompt("four")])
