"""Watching a task's output: ``run(..., notify_on=PATTERN)`` wakes the agent with the lines that
match, merged within 200 ms, capped per task, each wake with an id of its own and owed until
acknowledged, none lost or sent again under another id across a daemon's SIGKILL.

The logic runs in-process (the tools over a real manager and real tasks, the agent socket served
by the test); the crash, which only a real process can show, with a real daemon SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from hive.agent_socket import Wake
from hive.bash._tools import BashTools
from hive.bash.ends._watch import Watcher
from tests.helpers.daemon import DaemonHandle
from tests.helpers.gates import make_gate, release_gate
from tests.helpers.inotify import wait_until
from tests.helpers.listener import AgentListener
from tests.helpers.results import call, structured
from tests.helpers.tools import serving_tools

GUARD = 30


async def _run(tools: BashTools, **args: Any) -> dict[str, Any]:
    result = await tools.call("run", args)
    assert not result.is_error, result.text
    return result.structured


def _matches(wakes: list[Wake], task_id: str) -> list[Wake]:
    return [
        w for w in wakes if w.end_id is not None and w.end_id.startswith(f"{task_id}:") and ":m" in w.end_id
    ]


async def test_matching_lines_of_either_stream_wake_the_agent_merged_and_apart_from_the_end(
    short_tmp: Path, agent: AgentListener
) -> None:
    gate = make_gate(short_tmp)
    cmd = f"echo compiling; echo 'server listening on 8080'; echo 'FAILED one' >&2; read x < {gate}; echo FAILED two"
    with trio.fail_after(GUARD):
        async with agent.serving(), serving_tools(short_tmp, agent_socket=agent.path) as tools:
            await _run(tools, cmd=cmd, name="w", wait_seconds=0, notify_on="listening|FAILED")
            await agent.wait_for(1)
            first = _matches(agent.wakes, "w")[0]
            assert first.sender == "bash-task-w"
            # Written together: one wake, the lines with their streams, in stream order.
            assert first.body.splitlines() == [
                "bash task w printed:",
                "[stdout] server listening on 8080",
                "[stderr] FAILED one",
            ]
            await release_gate(gate)
            serial = structured_serial(tools, "w")
            await agent.wait_for_ends({f"w:{serial}", f"w:{serial}:m2"})
            # Every wake acknowledged, the task ended and scanned: nothing is left on disk.
            tasks = short_tmp / "state" / "bash-tasks"
            await wait_until(lambda: not list(tasks.glob("*.watch")), tasks)
    matches = _matches(agent.wakes, "w")
    assert [w.end_id for w in matches] == [f"w:{serial}:m1", f"w:{serial}:m2"]
    assert matches[1].body == "bash task w printed:\n[stdout] FAILED two"
    (end,) = [w for w in agent.wakes if w.end_id == f"w:{serial}"]
    assert end.body.startswith("bash task w ended: done")


def structured_serial(tools: BashTools, task_id: str) -> str:
    return tools.manager.get(task_id).record.serial


async def test_at_most_notify_max_wakes_then_one_saying_later_matches_are_not_sent(
    short_tmp: Path, agent: AgentListener
) -> None:
    gates = [make_gate(short_tmp, f"g{i}") for i in range(4)]
    lines = "; ".join(f"echo hit {i}; read x < {gate}" for i, gate in enumerate(gates))
    with trio.fail_after(GUARD):
        async with agent.serving(), serving_tools(short_tmp, agent_socket=agent.path) as tools:
            await _run(
                tools,
                cmd=f"{lines}; echo hit end",
                name="cap",
                wait_seconds=0,
                notify_on="^hit",
                notify_max=2,
            )
            for i, gate in enumerate(gates):
                # Each hit in a wake of its own: the next line comes only once this one's wake is in.
                while len(_matches(agent.wakes, "cap")) < min(i + 1, 3):
                    await agent.wait_for(len(agent.wakes) + 1)
                await release_gate(gate)
            await tools.call("status", {"id": "cap", "wait_seconds": GUARD})
    bodies = [w.body for w in _matches(agent.wakes, "cap")]
    assert bodies[:2] == ["bash task cap printed:\n[stdout] hit 0", "bash task cap printed:\n[stdout] hit 1"]
    assert len(bodies) == 3
    assert bodies[2].startswith(
        "bash task cap printed: more lines that match its notify_on pattern; later matches are not sent"
    )


async def test_a_bad_pattern_or_a_max_without_one_is_refused_at_run(short_tmp: Path) -> None:
    async with serving_tools(short_tmp) as tools:
        bad = await tools.call("run", {"cmd": "true", "notify_on": "(unclosed", "full": True})
        assert bad.is_error and bad.structured["error"] == "BadArgument"
        assert (
            "notify_on '(unclosed' is not a pattern RE2 takes (missing ): (unclosed). Give one in RE2 "
            "syntax, which is Python's re without backreferences and lookaround (they backtrack)" in bad.text
        )
        # What would backtrack is refused: a backreference, a lookahead.
        for pattern, reason in [
            (r"(a)\1", r"invalid escape sequence: \1"),
            ("(?=a)", "invalid perl operator: (?="),
        ]:
            refused = await tools.call("run", {"cmd": "true", "notify_on": pattern})
            assert refused.is_error and f"is not a pattern RE2 takes ({reason})" in refused.text
        lone = await tools.call("run", {"cmd": "true", "notify_max": 5})
        assert lone.is_error and "notify_max is given without notify_on" in lone.text
        too_many = await tools.call(
            "run", {"cmd": "true", "notify_on": "x", "notify_max": 1001, "full": True}
        )
        assert too_many.is_error and too_many.structured["error"] == "BadArgument"
        assert tools.manager.tasks == {}  # nothing ran


async def test_a_match_wake_not_yet_acknowledged_is_sent_again_under_its_id_after_a_restart(
    short_tmp: Path,
) -> None:
    # The agent socket refuses: the wake stays owed, on disk, and a new manager sends it again.
    refusing = AgentListener(short_tmp / "agent.sock", refuse=True)
    gate = make_gate(short_tmp)
    with trio.fail_after(GUARD):
        async with refusing.serving(), serving_tools(short_tmp, agent_socket=refusing.path) as tools:
            await _run(tools, cmd=f"echo ready; read x < {gate}", name="r", wait_seconds=0, notify_on="ready")
            await refusing.wait_for_refusals(1)
            serial = structured_serial(tools, "r")
            await release_gate(gate)
            await tools.call("status", {"id": "r", "wait_seconds": GUARD})
            state = json.loads((short_tmp / "state" / "bash-tasks" / f"r@{serial}.watch").read_text())
            assert [w["number"] for w in state["owed"]] == [1]
        listener = AgentListener(short_tmp / "agent2.sock")
        async with listener.serving(), serving_tools(short_tmp, agent_socket=listener.path):
            await listener.wait_for_ends({f"r:{serial}:m1", f"r:{serial}"})
    assert [w.end_id for w in _matches(listener.wakes, "r")] == [f"r:{serial}:m1"]


async def test_a_pattern_over_its_bound_is_dropped_with_a_wake_and_not_searched_again_after_a_restart(
    short_tmp: Path,
) -> None:
    refusing = AgentListener(short_tmp / "agent.sock", refuse=True)
    with trio.fail_after(GUARD):
        # Every search goes over the bound: the first line is searched, and the pattern dropped.
        over = serving_tools(short_tmp, agent_socket=refusing.path, line_seconds=-1.0)
        async with refusing.serving(), over as tools:
            await _run(tools, cmd="echo hit; echo hit again", name="d", wait_seconds=0, notify_on="hit")
            await refusing.wait_for_refusals(2)
            serial = structured_serial(tools, "d")
            await tools.call("status", {"id": "d", "wait_seconds": GUARD})
        # The next daemon sends what is owed, and searches nothing again (the bound holds no more).
        listener = AgentListener(short_tmp / "agent2.sock")
        async with listener.serving(), serving_tools(short_tmp, agent_socket=listener.path):
            await listener.wait_for_ends({f"d:{serial}:m1", f"d:{serial}:m2", f"d:{serial}"})
            tasks = short_tmp / "state" / "bash-tasks"
            await wait_until(lambda: not list(tasks.glob("*.watch")), tasks)
    matches = _matches(listener.wakes, "d")
    assert [w.end_id for w in matches] == [f"d:{serial}:m1", f"d:{serial}:m2"]
    assert matches[0].body == "bash task d printed:\n[stdout] hit"
    assert matches[1].body.startswith(
        "bash task d printed: lines its notify_on pattern is dropped for: searching one line took "
    )
    assert "so later lines are not searched. status('d', stdout_offset=" in matches[1].body


def test_a_match_wake_key_is_told_apart_from_an_end_key() -> None:
    assert Watcher.owns(("t", "ab12:m3"))
    assert not Watcher.owns(("t", "ab12"))


async def test_no_match_is_lost_or_sent_twice_under_another_id_across_a_sigkill(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gates = [make_gate(daemon.root, f"g{i}") for i in range(3)]
    cmd = "; ".join(f"echo 'match {i}'; echo noise; read x < {gate}" for i, gate in enumerate(gates))
    with trio.fail_after(60):
        async with agent.serving():
            async with daemon.running(stop=False) as first, daemon.session() as session:
                await call(
                    session,
                    "run",
                    cmd=f"cd {daemon.root}; {cmd}; echo 'match end'",
                    name="k",
                    wait_seconds=0,
                    notify_on="^match",
                )
                await agent.wait_for(1)
                status = structured(await call(session, "status", id="k"))
                os.kill(first.pid, signal.SIGKILL)
                await first.wait()
            # While no daemon runs, the task prints its next match.
            await release_gate(gates[0])
            async with daemon.running(), daemon.session() as session:
                for i, gate in enumerate(gates[1:], start=1):
                    # The task is at its next gate once its match has come.
                    await _until_printed(agent, "k", f"match {i}")
                    await release_gate(gate)
                done = structured(await call(session, "status", id="k", wait_seconds=30))
                assert done["state"] == "done"
                await _until_printed(agent, "k", "match end")
    # A wake sent again under its own id (its acknowledgement lost in the SIGKILL) is one wake:
    # the harness drops the repeat. No line may come under two ids.
    by_id: dict[str, str] = {}
    for wake in _matches(agent.wakes, "k"):
        assert by_id.setdefault(str(wake.end_id), wake.body) == wake.body
    lines = [line for body in by_id.values() for line in body.splitlines()[1:]]
    assert lines == ["[stdout] match 0", "[stdout] match 1", "[stdout] match 2", "[stdout] match end"]
    assert status["state"] == "running"


async def _until_printed(agent: AgentListener, task_id: str, line: str) -> None:
    while not any(f"[stdout] {line}" in w.body.splitlines() for w in _matches(agent.wakes, task_id)):
        await agent.wait_for(len(agent.wakes) + 1)


async def test_hive_bash_run_notify_on_is_the_tools_notify_on(served: DaemonHandle) -> None:
    sock = str(served.socket)
    base = [sys.executable, "-m", "hive.cli", "bash", "run", "--socket", sock, "--wait", "30"]
    with trio.fail_after(60):
        bad = await trio.run_process(
            [*base, "--notify-on", "(", "true"], capture_stdout=True, capture_stderr=True, check=False
        )
        good = await trio.run_process(
            [*base, "--name", "cli-watch", "--notify-on", "ERROR", "--notify-max", "3", "true"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert bad.returncode == 2 and b"hive: --notify-on '(' is not a pattern RE2 takes" in bad.stderr
    assert good.returncode == 0, good.stderr
    record = json.loads(served.task_file("cli-watch", ".json").read_text())
    assert (record["notify_on"], record["notify_max"]) == ("ERROR", 3)


CATASTROPHIC = "^(a+)+$"
"""Backtracks 2**40 times on ``'a' * 40 + '!'`` (41 bytes)."""
QUADRATIC = "a.*b"
"""Backtracks n**2 / 2 times on a line of n ``a``: some 25 minutes at 1 MiB."""
PROMPT = 15
"""Long enough for an answer on a loaded machine, far shorter than any stall the patterns make."""


async def test_no_pattern_stalls_the_daemon_nor_its_restart(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    catastrophic = "printf 'a%.0s' $(seq 40); echo '!'; echo aaaa"
    quadratic = "head -c 1048576 /dev/zero | tr '\\0' a; echo; echo ab"
    gate = make_gate(daemon.root)
    with trio.fail_after(120):
        async with agent.serving():
            async with daemon.running() as first, daemon.session() as session:
                with trio.fail_after(PROMPT):
                    await call(
                        session, "run", cmd=catastrophic, name="cat", wait_seconds=0, notify_on=CATASTROPHIC
                    )
                    await call(
                        session, "run", cmd=quadratic, name="quad", wait_seconds=0, notify_on=QUADRATIC
                    )
                    await call(
                        session,
                        "run",
                        cmd=f"read x < {gate}; {catastrophic}",
                        name="later",
                        wait_seconds=0,
                        notify_on=CATASTROPHIC,
                    )
                # Each task's output is matched whole: the line after the one that stalls wakes.
                await _until_printed(agent, "cat", "aaaa")
                await _until_printed(agent, "quad", "ab")
                with trio.fail_after(PROMPT):
                    assert structured(await call(session, "status", id="quad"))["state"] == "done"
                first.send_signal(signal.SIGINT)
                with trio.fail_after(PROMPT):
                    await first.wait()
            # The output comes while no daemon runs: the next one scans it at its start.
            await release_gate(gate)
            async with daemon.running() as second, daemon.session() as session:
                await _until_printed(agent, "later", "aaaa")
                with trio.fail_after(PROMPT):
                    assert (
                        structured(await call(session, "status", id="later", wait_seconds=30))["state"]
                        == "done"
                    )
                second.send_signal(signal.SIGINT)
                with trio.fail_after(PROMPT):
                    await second.wait()


def _status_mib(pid: int, field: str) -> float:
    """A memory figure of process ``pid`` from its ``/proc/<pid>/status`` (VmRSS, VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _matches_said(wakes: list[Wake], task_id: str) -> int:
    """How many matching lines the match wakes of ``task_id`` say, shown or counted."""
    said = 0
    for wake in _matches(wakes, task_id):
        for line in wake.body.splitlines()[1:]:
            if line.startswith("(and "):
                said += int(line.split()[1])
            elif line.startswith(("[stdout] ", "[stderr] ")):
                said += 1
    return said


WATCHED_MIB = 32
"""What the task prints, every line matching: 550,073 lines, which the old watcher held at once
(its peak RSS passed its RSS before the task by 110 MiB; at 64 MiB of shorter lines, by 1 GB)."""
RSS_GROWTH_MIB = 24
"""The most the daemon's peak RSS may pass its RSS before the task: the reads and searches in
flight (1 MiB a stream) and the allocator's slack (6 MiB measured), far below what the lines take."""


async def test_the_daemon_memory_stays_flat_whatever_a_watched_task_prints(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    line = "hit " + "x" * 56
    lines = -(-(WATCHED_MIB << 20) // (len(line) + 1))  # the last one cut short by head
    with trio.fail_after(120):
        async with (
            agent.serving(),
            daemon.running("--max-output-bytes", "64MiB") as process,
            daemon.session() as session,
        ):
            # A first watched task warms what every watch uses (RE2, the worker threads).
            await call(session, "run", cmd="echo hit", name="warm", wait_seconds=0, notify_on="^hit")
            while _matches_said(agent.wakes, "warm") < 1:
                await agent.wait_for(len(agent.wakes) + 1)
            before = _status_mib(process.pid, "VmRSS")
            cmd = f"yes {line} | head -c {WATCHED_MIB << 20}"
            await call(session, "run", cmd=cmd, name="m", wait_seconds=0, notify_on="^hit", notify_max=1000)
            while _matches_said(agent.wakes, "m") < lines:
                await agent.wait_for(len(agent.wakes) + 1)
            peak = _status_mib(process.pid, "VmHWM")
    assert _matches_said(agent.wakes, "m") == lines  # every match said, once
    assert peak - before < RSS_GROWTH_MIB, f"the daemon's RSS went from {before:.0f} MiB to {peak:.0f} MiB"
