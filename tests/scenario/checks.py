"""The invariants a fleet run must keep, checked over what it recorded, each a named assertion
whose message carries the seed that reproduces it.

What is read: each agent's turn log (``turns.jsonl``: what each turn carried, whether it was
delivered, the stream's tool calls), its bash daemon's task records (``bash-tasks/<id>.json``)
and loose ends, the fake claude's record (each tool call the agent made and the answer it got),
the tasks' own last acts (``last-acts/<name>``: the time a task's command ended), and what the
operator did (`tests.scenario.fleet.Operated`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from tests.scenario.fleet import AgentRun, Fleet, fake_record, subagents, tagged

FINAL = {"done", "timed_out", "stopped", "interrupted"}
END_TIME_BOUND = 0.1
"""Seconds between a task's own last act and the end time its record gives."""


@attrs.frozen
class Counts:
    """What a run checked: N of each, and how many went wrong."""

    tasks: int
    ends_lost: int
    ends_twice: int
    end_times_wrong: int
    messages: int
    messages_lost: int
    messages_twice: int
    turns: int
    faults: dict[str, int] = attrs.field(factory=dict)
    """The faults injected, by kind."""

    def line(self) -> str:
        return (
            f"ends: {self.ends_lost} lost, {self.ends_twice} twice of {self.tasks}; "
            f"end times: {self.end_times_wrong} wrong; "
            f"messages: {self.messages_lost} lost, {self.messages_twice} twice of {self.messages}; "
            f"{self.turns} turns; faults: {', '.join(f'{n} {k}' for k, n in sorted(self.faults.items())) or 'none'}"
        )


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            found.append(json.loads(line))
    return found


def _turn_records(agent: AgentRun) -> list[dict[str, Any]]:
    return [line for line in _lines(agent.state / "turns.jsonl") if line.get("type") == "hive"]


def _delivered_items(agent: AgentRun) -> list[dict[str, Any]]:
    items = []
    for record in _turn_records(agent):
        if record.get("delivered") and record.get("kind") == "turn":
            items += record.get("carried", [])
    return items


def _records(agent: AgentRun) -> dict[str, dict[str, Any]]:
    tasks = agent.state / "bash-tasks"
    return {p.stem: json.loads(p.read_text()) for p in tasks.glob("*.json")} if tasks.is_dir() else {}


def _seen_inline(agent: AgentRun) -> set[str]:
    """The tasks whose end an answer to the agent's own call showed."""
    seen = set()
    for event in fake_record(agent):
        result = event.get("result") if event.get("event") == "mcp_call" else None
        if isinstance(result, dict) and result.get("state") in FINAL and isinstance(result.get("id"), str):
            seen.add(result["id"])
    return seen


def check(fleet: Fleet) -> Counts:
    """Check every invariant; the counts of what was checked. Any broken one raises, naming the
    seed and every invariant broken."""
    counts, problems = verify(fleet)
    if problems:
        shown = "\n  ".join(problems[:40])
        raise AssertionError(f"seed {fleet.seed}: {counts.line()}\n  {shown}")
    return counts


def verify(fleet: Fleet) -> tuple[Counts, list[str]]:
    """Every invariant checked: the counts of what was checked, and what was broken (each line
    starting with the invariant's name)."""
    tasks = ends_lost = ends_twice = wrong_times = 0
    problems: list[str] = []
    for agent in fleet.agents:
        name = agent.plan.name
        records = _records(agent)
        inline = _seen_inline(agent)
        woken: dict[str, set[str]] = {}
        woken_ends = {i["end_id"] for i in _delivered_items(agent) if i.get("end_id")}
        for item in _delivered_items(agent):
            sender = item.get("from", "")
            if sender.startswith("bash-task-") and item.get("end_id"):
                task = sender.removeprefix("bash-task-")
                # `<id>:<serial>` is a run's end; `<id>:<serial>:m<n>` a notify_on match.
                if item["end_id"].startswith(f"{task}:") and item["end_id"].count(":") == 1:
                    woken.setdefault(task, set()).add(item["end_id"])
        for task, record in records.items():
            if record["state"] not in FINAL:
                problems.append(
                    f"ends_final: {name}'s task {task} is {record['state']} after the fleet settled"
                )
                continue
            tasks += 1
            if task not in inline and task not in woken:
                ends_lost += 1
                problems.append(
                    f"ends_reach_agent: {name}'s task {task} ended {record['state']} and was never told"
                )
            if task not in agent.plan.reused and len(woken.get(task, ())) > 1:
                ends_twice += 1
                problems.append(f"one_end_id: {name}'s task {task} was woken under {sorted(woken[task])}")
            last_act = agent.root / "last-acts" / task
            if record["state"] == "done" and task not in agent.plan.reused and last_act.exists():
                ended = float(last_act.read_text() or "nan")
                if not abs(record["ended_at"] - ended) <= END_TIME_BOUND:
                    wrong_times += 1
                    problems.append(
                        f"end_times: {name}'s task {task} ended (its last act) at {ended:.3f}, recorded "
                        f"{record['ended_at']:.3f}"
                    )
        for session in subagents(agent):
            last = session.get("last") or {}
            end = f"subagent-{session['name']}:{last.get('turn')}"
            if session.get("current"):
                problems.append(f"subagents_ended: {name}'s subagent {session['name']} is still in a turn")
            elif last and not last.get("told") and end not in woken_ends:
                problems.append(f"subagent_ends_reach_agent: {name}'s subagent turn {end} was never told")
        problems += _costs(agent)
        owed = sorted(p.name for p in (agent.state / "mcp-loose-ends").glob("*.json"))
        if owed:
            problems.append(f"nothing_owed: {name} still owes {owed}")
        problems += _tool_inputs(agent)

    for index, status in fleet.operated.stops:
        if status != 0:
            problems.append(
                f"stops_on_sigint: {fleet.agents[index].plan.name}'s harness ended {status} on SIGINT"
            )
    messages, lost, twice = _messages(fleet, problems)
    left = tagged(fleet.tag)
    if left:
        problems.append(f"nothing_left: processes of the fleet outlived it: {_described(left)}")
    faults = dict(Counter(kind for _, kind, _ in fleet.operated.faults))
    counts = Counts(tasks, ends_lost, ends_twice, wrong_times, messages, lost, twice, _turns(fleet), faults)
    return counts, problems


def _messages(fleet: Fleet, problems: list[str]) -> tuple[int, int, int]:
    """Every message queued was carried by exactly one completed turn: the operator's prompts (by
    their text) and the wakes (by end id)."""
    total = lost = twice = 0
    for agent in fleet.agents:
        delivered = _delivered_items(agent)
        bodies = Counter(i["body"] for i in delivered if i.get("kind") == "prompt")
        ends = Counter(i["end_id"] for i in delivered if i.get("end_id"))
        for index, body, status in fleet.operated.prompts:
            if index != agent.index or status != 0:
                continue
            total += 1
            if bodies[body] == 0:
                lost += 1
                problems.append(
                    f"messages_carried: {agent.plan.name} acknowledged {body!r}; no turn carried it"
                )
            elif bodies[body] > 1:
                twice += 1
                problems.append(f"messages_carried: {body!r} was carried by {bodies[body]} completed turns")
        for end, count in ends.items():
            total += 1
            if count > 1:
                twice += 1
                problems.append(f"messages_carried: {agent.plan.name}'s wake {end} carried by {count} turns")
    return total, lost, twice


def _costs(agent: AgentRun) -> list[str]:
    """Per-turn costs are per turn: within each session, the turns' costs add up to the session's
    total as the agent last reported it (the agents report it cumulative)."""
    spent: dict[str, float] = {}
    total: dict[str, float] = {}
    for record in _turn_records(agent):
        session = record.get("session_id")
        if session is None:
            continue
        spent[session] = spent.get(session, 0.0) + float(record.get("cost_usd", 0.0))
        reported = float(record.get("session_cost_usd", 0.0))
        if reported:
            total[session] = reported
    return [
        f"costs_sum: {agent.plan.name}'s session {session}: its turns' costs add up to {spent[session]:.6f} USD, "
        f"the session's total is {total[session]:.6f}"
        for session in total
        if abs(spent[session] - total[session]) > 1e-6
    ]


def _tool_inputs(agent: AgentRun) -> list[str]:
    """The tool inputs in the turn log are what the agent sent."""
    sent = [
        (f"mcp__{e['server']}__{e['tool']}", json.dumps(e["arguments"], sort_keys=True))
        for e in fake_record(agent)
        if e.get("event") == "mcp_call"
    ]
    logged = set()
    for line in _lines(agent.state / "turns.jsonl"):
        if line.get("type") == "assistant":
            for block in line.get("message", {}).get("content", []):
                if block.get("type") == "tool_use":
                    logged.add((block["name"], json.dumps(block.get("input"), sort_keys=True)))
    if agent.starts > 1:
        return []  # a turn a SIGKILL of its harness cut short may be missing from the log
    return [
        f"tool_inputs: {agent.plan.name} sent {name} {arguments}; the turn log has no such call"
        for name, arguments in sent
        if (name, arguments) not in logged
    ]


def _turns(fleet: Fleet) -> int:
    return sum(len(_turn_records(a)) for a in fleet.agents)


def _described(pids: list[int]) -> str:
    shown = []
    for pid in pids[:10]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmdline = "?"
        shown.append(f"{pid} {cmdline[:120]}")
    return "; ".join(shown)
