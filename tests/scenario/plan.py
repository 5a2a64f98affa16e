"""What a scenario does, drawn from its seed: each agent's turns (the tool calls its model makes)
and the operator's schedule (prompts, observation, faults).

Everything here is a pure function of the seed, so a failing seed replays the same plan. What
the fleet then does with it (which turn carries which message, when a daemon is killed relative
to a task) depends on timing too; the checks (`tests.scenario.checks`) hold whatever the timing.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import attrs

TURNS = 400
"""Turns scripted per agent: more than a run takes (the fake repeats its last)."""


@attrs.frozen
class AgentPlan:
    name: str
    turns: list[list[dict[str, Any]]]
    tasks: tuple[str, ...]
    """Every task name its turns run, in order (a reused name once)."""
    reused: frozenset[str]
    """Names run more than once: their runs share a name, so only what holds per name is checked."""
    subagents: bool = False


@attrs.frozen
class Action:
    """One step of the operator's schedule, ``delay`` seconds after the last."""

    delay: float
    kind: str
    agent: int
    target: str = ""


KINDS = (
    ("prompt", 40),
    ("status_wait", 12),
    ("tail", 8),
    ("stop", 8),
    ("web_stop", 6),
    ("kill_bash_daemon", 5),
    ("kill_harness", 4),
    ("kill_subagent_daemon", 2),
    ("disk_full", 2),
)
FAULTS = {"kill_bash_daemon", "kill_harness", "kill_subagent_daemon", "disk_full"}


def task_command(rng: random.Random, name: str, last_acts: Path) -> tuple[str, dict[str, Any]]:
    """A task's command (its last act writes the time it ended to ``last_acts/<name>``), and
    the options of its `run`."""
    stamp = f"printf '%s' \"$EPOCHREALTIME\" > {last_acts}/{name}"
    kind = rng.choice(["quick", "quick", "short", "short", "slow", "fails", "times_out", "chatty"])
    options: dict[str, Any] = {"wait_seconds": rng.choice([0, 0, 0.5, 3])}
    if kind == "quick":
        cmd = f"echo {name}; {stamp}"
    elif kind == "short":
        cmd = f"sleep 0.{rng.randint(1, 9)}; echo {name} done; {stamp}"
    elif kind == "slow":
        cmd = f"sleep {rng.randint(1, 3)}; echo {name} done; {stamp}"
    elif kind == "fails":
        cmd = f"echo {name} >&2; {stamp}; exit {rng.randint(1, 9)}"
    elif kind == "times_out":
        cmd = f"sleep 30; {stamp}"
        options["timeout_secs"] = rng.choice([0.5, 1])
    else:
        cmd = f"for i in 1 2 3; do echo {name} line $i; echo {name} MARK $i; sleep 0.2; done; {stamp}"
        options["notify_on"] = "MARK 2"
    return cmd, options


def agent_plan(rng: random.Random, index: int, last_acts: Path, *, subagents: bool) -> AgentPlan:
    name = f"a{index}"
    turns: list[list[dict[str, Any]]] = []
    tasks: list[str] = []
    reused: set[str] = set()
    sessions: list[str] = []
    total = 0.0
    for n in range(TURNS):
        steps: list[dict[str, Any]] = [{"init": {}}]
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            roll = rng.random()
            if subagents and rng.random() < 0.3:
                steps.append(subagent_call(rng, sessions))
            elif roll < 0.55 or not tasks:
                task = f"{name}-{len(tasks)}"
                cmd, options = task_command(rng, task, last_acts)
                tasks.append(task)
                steps.append(call("run", cmd=cmd, name=task, **options))
            elif roll < 0.65:
                task = rng.choice(tasks)
                reused.add(task)
                steps.append(
                    call("run", cmd=f"echo again {task}", name=task, wait_seconds=rng.choice([0, 2]))
                )
            elif roll < 0.85:
                arguments: dict[str, Any] = {"id": rng.choice(tasks), "wait_seconds": rng.choice([0, 0, 1])}
                if rng.random() < 0.4:
                    arguments["stdout_offset"] = rng.choice([0, 4])
                steps.append(call("status", **arguments))
            else:
                steps.append(call("stop", id=rng.choice(tasks)))
        cost = round(rng.uniform(0.001, 0.02), 6)
        total = round(total + cost, 6)
        steps.append({"text": f"{name} turn {n + 1}"})
        steps.append({"result": {"total_cost_usd": total}})
        turns.append(steps)
    return AgentPlan(name, turns, tuple(tasks), frozenset(reused), subagents)


def call(tool: str, server: str = "bash", **arguments: Any) -> dict[str, Any]:
    return {"mcp_call": {"server": server, "tool": tool, "arguments": arguments}}


def subagent_call(rng: random.Random, sessions: list[str]) -> dict[str, Any]:
    """A call of the subagent tools: a new session (on the ACP fixture's default turn), a next
    turn of one (refused while its turn runs, which is fine), or a look at one."""
    roll = rng.random()
    if roll < 0.35 or not sessions:
        sessions.append(f"s{len(sessions)}")
        return call("start", "subagent", name=sessions[-1], prompt=f"work {len(sessions)}", runtime="acp")
    if roll < 0.7:
        return call("continue", "subagent", name=rng.choice(sessions), prompt="go on")
    return call("status", "subagent", name=rng.choice(sessions), wait_seconds=rng.choice([0, 2]))


def schedule(rng: random.Random, plans: list[AgentPlan], seconds: float, *, faults: bool) -> list[Action]:
    """The operator's actions over about ``seconds``."""
    kinds = [k for k, _ in KINDS if faults or k not in FAULTS]
    weights = [w for k, w in KINDS if faults or k not in FAULTS]
    actions: list[Action] = []
    spent = 0.0
    while spent < seconds:
        delay = round(rng.uniform(0.1, 0.7), 3)
        spent += delay
        kind = rng.choices(kinds, weights)[0]
        agent = rng.randrange(len(plans))
        if kind == "kill_subagent_daemon" and not plans[agent].subagents:
            kind = "kill_bash_daemon"
        # The operator looks at tasks by the names the agent uses; one that does not exist yet
        # is an error the CLI reports, which is fine.
        target = rng.choice(plans[agent].tasks[: max(1, int(len(plans[agent].tasks) * spent / seconds))])
        actions.append(Action(delay, kind, agent, target))
    return actions
