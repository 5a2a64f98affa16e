"""Power cuts: what the bash daemon acknowledged survives a file system that keeps only what was
made durable (fsync of the file, fsync of its directory: see `tests.helpers.power_cut`).

A real daemon runs tasks with its fsyncs journalled; the test notes where in the journal each
`run` was answered `task started` and where each end reached the agent. Then, for cuts at
several points of the journal, the state directory is rebuilt as only the durable state would
leave it, and a real daemon restarted on it must know every task it acknowledged by then, and
tell the agent every end it had not told by then (``interrupted``, for a task the cut killed).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from hive.agent._loop import SESSION_FILE, TURN_LOG
from hive.agent._model import Phase
from hive.agent._session import SessionStore
from hive.agent.harness import lock_state_dir
from hive.wake import Wake
from tests.helpers import power_cut
from tests.helpers.agent_loop import ScriptedRuntime, serving
from tests.helpers.daemon import DaemonHandle, remove_task_cgroups
from tests.helpers.inotify import wait_until
from tests.helpers.jsonrpc import answer, open_raw_session, request, run_request, send
from tests.helpers.listener import AgentListener

TASKS = 10
CUTS = 6


@attrs.define
class Acknowledged:
    """A task answered ``running``: where the journal was then, and when its end reached the agent."""

    task_id: str
    at: int
    told_at: int | None = None


@attrs.define
class JournalledListener(AgentListener):
    """An agent socket that notes where the journal was as each wake arrived."""

    journal: Path | None = None
    arrived_at: dict[str, int] = attrs.field(factory=dict)

    async def _take(self, request: Any) -> None:
        if self.journal is not None and getattr(request, "sender", None) is not None:
            self.arrived_at.setdefault(
                request.sender.removeprefix("bash-task-"), journal_length(self.journal)
            )
        await super()._take(request)


def journal_length(journal: Path) -> int:
    try:
        return journal.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


async def start_task(daemon: DaemonHandle, journal: Path, number: int) -> Acknowledged:
    stream, reader = await open_raw_session(daemon.socket)
    async with stream:
        await send(stream, run_request(2, cmd=f"sleep 0.{number % 4}; echo {number}", wait_seconds=0))
        started = (await answer(reader, 2))["structuredContent"]
    assert started["state"] == "running", started
    return Acknowledged(started["id"], journal_length(journal))


async def known(daemon: DaemonHandle, task_ids: list[str]) -> set[str]:
    """Those of ``task_ids`` that the daemon answers `status` for."""
    stream, reader = await open_raw_session(daemon.socket)
    found = set()
    async with stream:
        for number, task_id in enumerate(task_ids, start=2):
            await send(
                stream, request(number, "tools/call", {"name": "status", "arguments": {"id": task_id}})
            )
            result = await answer(reader, number)
            if not result.get("isError"):
                found.add(task_id)
    return found


def cut_points(acks: list[Acknowledged], length: int) -> list[int]:
    """Where to cut: just after each answer and each end told, and at points spread over the
    journal, ``CUTS`` in all (or fewer, if there are not so many)."""
    events = sorted({a.at for a in acks} | {a.told_at for a in acks if a.told_at is not None})
    spread = {round(i * length / (CUTS - 1)) for i in range(CUTS)}
    points = sorted(set(events[:: max(1, len(events) // (CUTS // 2))]) | spread)
    return sorted({points[round(i * (len(points) - 1) / (CUTS - 1))] for i in range(CUTS)})


@attrs.define
class CutResult:
    cut: int
    acknowledged: int
    unknown: set[str]
    never_told: set[str]


async def restart_after_cut(
    root: Path, original: DaemonHandle, entries: list[dict[str, Any]], cut: int, acks: list[Acknowledged]
) -> CutResult:
    restarted = DaemonHandle.under(root)
    root.mkdir()
    acknowledged = [a for a in acks if a.at <= cut]
    owed = {a.task_id for a in acknowledged if a.told_at is None or a.told_at > cut}
    power_cut.rebuild(entries[:cut], original.root, original.state_dir.name, restarted.state_dir)
    agent = AgentListener(restarted.agent_socket)
    try:
        async with agent.serving(), restarted.running(stop=False) as process:
            found = await known(restarted, [a.task_id for a in acknowledged])
            with trio.fail_after(30):
                while not owed & found <= {w.sender.removeprefix("bash-task-") for w in agent.wakes}:
                    await agent.wait_for(len(agent.wakes) + 1)
            os.kill(process.pid, signal.SIGKILL)  # it has shown what it knows
            await process.wait()
    finally:
        remove_task_cgroups(restarted.state_dir)
    told = {w.sender.removeprefix("bash-task-") for w in agent.wakes}
    unknown = {a.task_id for a in acknowledged} - found
    return CutResult(cut, len(acknowledged), unknown, owed - told)


@attrs.define
class Rounds:
    results: list[CutResult] = attrs.field(factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.results)} cuts, {sum(r.acknowledged for r in self.results)} tasks acknowledged, "
            f"{sum(len(r.unknown) for r in self.results)} unknown after restart, "
            f"{sum(len(r.never_told) for r in self.results)} ends never told"
        )

    def failures(self) -> Iterator[str]:
        for result in self.results:
            if result.unknown or result.never_told:
                yield (
                    f"cut at entry {result.cut}: unknown {sorted(result.unknown)}, "
                    f"never told {sorted(result.never_told)}"
                )


async def test_a_power_cut_loses_no_acknowledged_task_and_no_end(daemon: DaemonHandle) -> None:
    journal = daemon.root / "journal"
    agent = JournalledListener(daemon.agent_socket, journal=journal)
    acks: list[Acknowledged] = []

    async def start(number: int) -> None:
        acks.append(await start_task(daemon, journal, number))

    async with (
        agent.serving(),
        daemon.running(wrapper=power_cut.journalled_argv(journal), stop=False) as process,
    ):
        for burst in (range(TASKS // 2), range(TASKS // 2, TASKS)):
            async with trio.open_nursery() as nursery:
                for number in burst:
                    nursery.start_soon(start, number)
        with trio.fail_after(30):
            while not {a.task_id for a in acks} <= set(agent.arrived_at):
                await agent.wait_for(len(agent.wakes) + 1)
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    for ack in acks:
        ack.told_at = agent.arrived_at[ack.task_id]

    entries = power_cut.entries(journal)
    rounds = Rounds()
    for number, cut in enumerate(cut_points(acks, len(entries))):
        rounds.results.append(
            await restart_after_cut(daemon.root / f"cut{number}", daemon, entries, cut, acks)
        )
    print(f"power cuts: {rounds.summary()} ({len(entries)} fsyncs journalled)")
    failures = list(rounds.failures())
    assert not failures, (
        f"{rounds.summary()}:\n" + "\n".join(failures) + "\n" + json.dumps([attrs.asdict(a) for a in acks])
    )


async def test_a_record_or_loose_end_a_cut_left_empty_owes_its_task_ended_interrupted(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    tasks_dir = daemon.state_dir / "bash-tasks"
    async with daemon.running(stop=False) as process:  # no agent socket served: its wakes wait
        for name in ("torn", "bare"):
            stream, reader = await open_raw_session(daemon.socket)
            async with stream:
                await send(stream, run_request(2, cmd="true", name=name, wait_seconds=0))
                await answer(reader, 2)
        with trio.fail_after(30):
            for name in ("torn", "bare"):
                await wait_until(
                    lambda name=name: daemon.task_file(name, ".exit").read_bytes().strip(), tasks_dir
                )
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    # As a cut leaves them: names made durable, the data in them not.
    for path in (
        daemon.task_file("torn", ".json"),
        daemon.loose_end("torn"),
        daemon.task_file("torn", ".exit"),
    ):
        path.write_bytes(b"")
    daemon.task_file("bare", ".json").write_bytes(b"")
    daemon.loose_end("bare").write_bytes(b"")
    for suffix in (".cmd", ".out", ".err", ".exit"):
        daemon.task_file("bare", suffix).unlink()
    (daemon.state_dir / "mcp-loose-ends" / "bash-task-lone@0123456789abcdef.json").write_bytes(b"")

    async with agent.serving(), daemon.running():
        with trio.fail_after(30):
            while not {"bash-task-torn", "bash-task-bare", "bash-task-lone"} <= set(agent.senders()):
                await agent.wait_for(len(agent.wakes) + 1)
        stream, reader = await open_raw_session(daemon.socket)
        async with stream:
            for number, name in enumerate(("torn", "bare"), start=2):
                await send(
                    stream, request(number, "tools/call", {"name": "status", "arguments": {"id": name}})
                )
                status = (await answer(reader, number))["structuredContent"]
                assert status["state"] == "interrupted", status
    for wake in agent.wakes:
        assert "interrupted" in wake.body, wake.body
    assert "skipping unreadable" not in daemon.stderr_text()


async def test_a_power_cut_after_a_turn_keeps_the_session_and_the_turn(short_tmp: Path) -> None:
    """The harness, in-process over a scripted runtime: once a turn has ended, a cut keeps the
    session to resume (else the next turn starts a new one, and the agent loses its context)
    and the turn log."""
    journal, state = short_tmp / "journal", short_tmp / "agent"
    runtime = ScriptedRuntime()
    with power_cut.journalling(journal), trio.fail_after(30):
        lock = lock_state_dir(state)
        try:
            async with serving(state, runtime) as harness:
                await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1"))
                await runtime.next_prompt()
                runtime.end()
                await harness.wait_state(lambda s: s.phase is Phase.IDLE and not s.queued)
        finally:
            lock.close()
    after = short_tmp / "after"
    assert power_cut.rebuild(power_cut.entries(journal), short_tmp, state.name, after)
    assert SessionStore(after / SESSION_FILE, "scripted").load() == "session-1"
    assert (after / TURN_LOG).exists()
