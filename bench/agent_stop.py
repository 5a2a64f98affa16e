"""18. How long ``hive-agent`` takes to stop on SIGINT: idle, against during a turn, side by side.

Each sample is a fresh ``hive-agent --with-bash-daemon`` (ready at ``READY=1``) on a private state
directory, which first runs one whole turn (so its session is open, its hyperhive server has
served, and an ACP agent is kept running between turns, as in real use). Then either:

- idle: nothing runs; SIGINT to ``hive-agent``;
- turn: a second turn is under way (claude: its first line is in the turn log; ACP: the agent has
  read the prompt), and holds until it is stopped; SIGINT to ``hive-agent``.

Timed from just before the SIGINT to the harness's exit (its ``waitpid``): everything it stops
(the turn, the bash daemon it started, the agent socket, the runtime, the hyperhive server) is
in it. Each exit status is checked to be 0. The two arms alternate (the order swapped every
round); 1 warm-up round, then 10, medians. Both runtimes: the fake claude
(``fixtures/fake_claude.py``, spawned per turn, which ends its turn at SIGINT) and the scripted ACP
agent (``fixtures/acp_agent.py``, whose turn ends at ``session/cancel``).

Target: the idle stop within 0.3 s (median), on both runtimes. The turn's stop is there for
comparison: it includes the agent's own end of the turn.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _agent import Agent, acp_env, claude_env, jsonl, prompt, running_agent, tail, wait_turns
from _common import Figure, main, scratch, summary

from fixtures import acp_agent, fake_claude

WARMUP = 1
ROUNDS = 10
TARGET = 0.3
"""The idle stop's bound, in seconds."""
CLAUDE_HOLD = [{"init": {}}, {"text": "working"}, {"wait_for_signal": "SIGUSR1"}, {"result": {}}]
"""A claude turn that holds until SIGUSR1 (its SIGINT ends it, as claude's does: see the script)."""
ACP_HOLD = [{"text": "working"}, {"sleep": 600}]
"""An ACP turn that holds until it is cancelled."""


def claude(root: Path) -> dict[str, str]:
    env = claude_env(root)
    env["FAKE_CLAUDE_SCRIPT"] = fake_claude.write_script(
        root / "claude-script.json",
        [[{"default_turn": True}], CLAUDE_HOLD],
        on_signal={"SIGINT": "interrupt_stream"},
    )
    env["FAKE_CLAUDE_RECORD"] = str(root / "claude.jsonl")
    return env


def acp(root: Path) -> dict[str, str]:
    env = acp_env(root)
    env["FAKE_ACP_SCRIPT"] = acp_agent.write_script(root / "acp-script.json", ["default", ACP_HOLD])
    return env


def claude_turn_under_way(agent: Agent) -> bool:
    """The held turn's first line is in the turn log (its first turn wrote one assistant line)."""
    return sum(1 for line in jsonl(agent.turns_log) if line.get("type") == "assistant") >= 2


def acp_turn_under_way(agent: Agent) -> bool:
    """The agent has read the held turn's prompt (the second)."""
    return sum(1 for event in jsonl(agent.root / "acp.jsonl") if event.get("event") == "prompt") >= 2


def wait_until(agent: Agent, done: Callable[[Agent], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done(agent):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the held turn did not start within {timeout} s: {tail(agent.root)}")
        time.sleep(0.001)


def one_stop(root: Path, env: dict[str, str], under_way: Callable[[Agent], bool] | None) -> float:
    """Seconds from SIGINT to exit of a hive-agent that has run one turn, and is idle (with
    ``under_way`` None) or in its second turn (once ``under_way`` says so)."""
    with running_agent(root, env) as agent:
        prompt(agent.socket, "the first turn")
        wait_turns(agent, 1)
        if under_way is not None:
            prompt(agent.socket, "a turn that holds")
            wait_until(agent, under_way)
        started = time.perf_counter()
        agent.process.send_signal(signal.SIGINT)
        status = agent.process.wait()
        took = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"hive-agent exited {status}: {tail(root)}")
    return took


def compare(
    root: Path, make_env: Callable[[Path], dict[str, str]], under_way: Callable[[Agent], bool]
) -> Any:
    samples: dict[str, list[float]] = {"idle": [], "turn": []}
    for round_ in range(WARMUP + ROUNDS):
        arms = ["idle", "turn"] if round_ % 2 == 0 else ["turn", "idle"]
        for arm in arms:
            where = root / f"{arm}-{round_}"
            where.mkdir()
            took = one_stop(where, make_env(where), None if arm == "idle" else under_way)
            if round_ >= WARMUP:
                samples[arm].append(took * 1000)
    return {arm: summary(values) for arm, values in samples.items()}


def run() -> list[Figure]:
    figures = []
    with scratch() as root:
        for name, make_env, under_way in (
            ("claude", claude, claude_turn_under_way),
            ("ACP", acp, acp_turn_under_way),
        ):
            base = root / name
            base.mkdir()
            stats = compare(base, make_env, under_way)
            idle, turn = stats["idle"], stats["turn"]
            figures.append(
                Figure(
                    "18 agent stop",
                    f"{name}: SIGINT → exit of an idle hive-agent, median of {ROUNDS} (p90 {idle['p90']:.0f} ms); "
                    "floor: the same during a turn",
                    idle["median"],
                    "ms",
                    turn["median"],
                    "SIGINT during a turn → exit",
                    f"< {TARGET * 1000:.0f}",
                    {"idle": idle, "turn": turn},
                )
            )
    return figures


if __name__ == "__main__":
    main(run)
