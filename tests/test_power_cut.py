"""Power cuts: what the bash daemon acknowledged survives a file system that keeps only what was
made durable (fsync of the file, fsync of its directory: see `tests.helpers.power_cut`).

A real daemon runs tasks with its fsyncs journalled; the test notes where in the journal each
`run` was answered `task started` and where each end and each match wake (``notify_on``) reached
the agent. Then, for cuts at several points of the journal, the state directory is rebuilt as
only the durable state would leave it, and a real daemon restarted on it must know every task it
acknowledged by then, tell the agent every end it had not told by then (``interrupted``, for a
task the cut killed), and tell every matching line once, under one id (the tasks' output, which
is theirs to make durable, is taken to have been kept).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import trio

from hive._files import fsync_dir
from hive.agent import SESSION_FILE, TURN_LOG, Phase, SessionStore, TurnLog
from hive.agent.harness import lock_state_dir
from hive.agent_socket import Wake
from tests.helpers import power_cut
from tests.helpers.agent_loop import ScriptedRuntime, serving
from tests.helpers.daemon import DaemonHandle, remove_task_cgroups
from tests.helpers.gates import make_gate, release_gate
from tests.helpers.inotify import wait_until
from tests.helpers.jsonrpc import answer, open_raw_session, request, run_request, send
from tests.helpers.listener import AgentListener

TASKS = 10
WATCHED = 4
"""Of the tasks, those that print lines their ``notify_on`` pattern matches, in two wakes."""
CUTS = 6


@attrs.define
class Acknowledged:
    """A task answered ``running``: where the journal was then, and when its end reached the agent."""

    task_id: str
    at: int
    told_at: int | None = None
    number: int = 0


@attrs.define
class JournalledListener(AgentListener):
    """An agent socket that notes where the journal was as each wake arrived."""

    journal: Path | None = None
    arrived_at: dict[str, int] = attrs.field(factory=dict)
    """Where the journal was as each task's end arrived, by task id."""
    matches: dict[str, tuple[int, str]] = attrs.field(factory=dict)
    """Where the journal was as each match wake arrived first, and its body, by its id."""

    async def _take(self, request: Any) -> None:
        if self.journal is not None and isinstance(request, Wake) and request.end_id is not None:
            at = journal_length(self.journal)
            if is_match(request):
                self.matches.setdefault(request.end_id, (at, request.body))
            else:
                self.arrived_at.setdefault(request.sender.removeprefix("bash-task-"), at)
        await super()._take(request)


def is_match(wake: Wake) -> bool:
    return ":m" in (wake.end_id or "")


def matched_lines(body: str) -> set[str]:
    return {line.removeprefix("[stdout] ") for line in body.splitlines()[1:]}


def journal_length(journal: Path) -> int:
    try:
        return journal.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def printed_matches(number: int) -> set[str]:
    """The lines task ``number`` prints that its pattern matches."""
    return {f"hit {number} a", f"hit {number} b"} if number < WATCHED else set()


async def start_task(daemon: DaemonHandle, journal: Path, number: int) -> Acknowledged:
    if number < WATCHED:  # two wakes: the second line comes well after the first one's wake
        arguments = {"cmd": f"echo hit {number} a; sleep 0.5; echo hit {number} b", "notify_on": "^hit"}
    else:
        arguments = {"cmd": f"sleep 0.{number % 4}; echo {number}"}
    stream, reader = await open_raw_session(daemon.socket)
    async with stream:
        await send(stream, run_request(2, wait_seconds=0, **arguments))
        started = (await answer(reader, 2))["structuredContent"]
    assert started["state"] == "running", started
    return Acknowledged(started["id"], journal_length(journal), number=number)


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


def cut_points(acks: list[Acknowledged], matches: dict[str, tuple[int, str]], length: int) -> list[int]:
    """Where to cut: just after each answer, each end and each match wake told, and at points spread over the
    journal, ``CUTS`` in all (or fewer, if there are not so many)."""
    events = sorted(
        {a.at for a in acks}
        | {a.told_at for a in acks if a.told_at is not None}
        | {at for at, _ in matches.values()}
    )
    spread = {round(i * length / (CUTS - 1)) for i in range(CUTS)}
    points = sorted(set(events[:: max(1, len(events) // (CUTS // 2))]) | spread)
    return sorted({points[round(i * (len(points) - 1) / (CUTS - 1))] for i in range(CUTS)})


@attrs.define
class CutResult:
    cut: int
    acknowledged: int
    unknown: set[str]
    never_told: set[str]
    lines_never_told: set[str] = attrs.field(factory=set)
    told_twice: set[str] = attrs.field(factory=set)
    """Matching lines told under two ids."""


async def restart_after_cut(
    root: Path,
    original: DaemonHandle,
    entries: list[dict[str, Any]],
    cut: int,
    acks: list[Acknowledged],
    matches: dict[str, tuple[int, str]],
) -> CutResult:
    restarted = DaemonHandle.under(root)
    root.mkdir()
    acknowledged = [a for a in acks if a.at <= cut]
    owed = {a.task_id for a in acknowledged if a.told_at is None or a.told_at > cut}
    power_cut.rebuild(entries[:cut], original.root, original.state_dir.name, restarted.state_dir)
    for output in [
        *restarted.state_dir.glob("bash-tasks/*.out"),
        *restarted.state_dir.glob("bash-tasks/*.err"),
    ]:
        output.write_bytes((original.state_dir / "bash-tasks" / output.name).read_bytes())
    # What the agent has of each match wake: its first arrival (a repeat of an id is dropped).
    first = {end_id: body for end_id, (at, body) in matches.items() if at <= cut}
    expected = {line for a in acknowledged for line in printed_matches(a.number)}

    agent = AgentListener(restarted.agent_socket)

    def told_lines() -> set[str]:
        # Every wake that has arrived so far, those that came before the wait below began too.
        for wake in agent.wakes:
            if is_match(wake):
                first.setdefault(wake.end_id or "", wake.body)
        return {line for body in first.values() for line in matched_lines(body)}

    try:
        async with agent.serving(), restarted.running(stop=False) as process:
            found = await known(restarted, [a.task_id for a in acknowledged])
            with trio.move_on_after(30):
                while not (
                    owed & found <= {w.sender.removeprefix("bash-task-") for w in agent.wakes}
                    and expected <= told_lines()
                ):
                    await agent.wait_for(len(agent.wakes) + 1)
            os.kill(process.pid, signal.SIGKILL)  # it has shown what it knows
            await process.wait()
    finally:
        remove_task_cgroups(restarted.state_dir)
    told = {w.sender.removeprefix("bash-task-") for w in agent.wakes}
    unknown = {a.task_id for a in acknowledged} - found
    lines_told = told_lines()
    ids_of: dict[str, set[str]] = {}
    for end_id, body in first.items():
        for line in matched_lines(body):
            ids_of.setdefault(line, set()).add(end_id)
    twice = {line for line, ids in ids_of.items() if len(ids) > 1}
    return CutResult(cut, len(acknowledged), unknown, owed - told, expected - lines_told, twice)


@attrs.define
class Rounds:
    results: list[CutResult] = attrs.field(factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.results)} cuts, {sum(r.acknowledged for r in self.results)} tasks acknowledged, "
            f"{sum(len(r.unknown) for r in self.results)} unknown after restart, "
            f"{sum(len(r.never_told) for r in self.results)} ends never told, "
            f"{sum(len(r.lines_never_told) for r in self.results)} matching lines never told, "
            f"{sum(len(r.told_twice) for r in self.results)} told under two ids"
        )

    def failures(self) -> Iterator[str]:
        for result in self.results:
            if result.unknown or result.never_told or result.lines_never_told or result.told_twice:
                yield (
                    f"cut at entry {result.cut}: unknown {sorted(result.unknown)}, "
                    f"never told {sorted(result.never_told)}, lines never told "
                    f"{sorted(result.lines_never_told)}, told under two ids {sorted(result.told_twice)}"
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
            while not {a.task_id for a in acks} <= set(agent.arrived_at) or len(agent.matches) < 2 * WATCHED:
                await agent.wait_for(len(agent.wakes) + 1)
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    for ack in acks:
        ack.told_at = agent.arrived_at[ack.task_id]

    entries = power_cut.entries(journal)
    rounds = Rounds()
    for number, cut in enumerate(cut_points(acks, agent.matches, len(entries))):
        rounds.results.append(
            await restart_after_cut(daemon.root / f"cut{number}", daemon, entries, cut, acks, agent.matches)
        )
    print(f"power cuts: {rounds.summary()} ({len(entries)} fsyncs journalled)")
    failures = list(rounds.failures())
    assert not failures, (
        f"{rounds.summary()}:\n" + "\n".join(failures) + "\n" + json.dumps([attrs.asdict(a) for a in acks])
    )


QUEUED = 4
"""Tasks started together under ``--max-running 1``: the first runs, the others wait in line."""


async def call_tool(daemon: DaemonHandle, tool: str, **arguments: Any) -> dict[str, Any]:
    """One tool call's result, on a raw session of its own."""
    stream, reader = await open_raw_session(daemon.socket)
    async with stream:
        await send(stream, request(2, "tools/call", {"name": tool, "arguments": arguments}))
        result: dict[str, Any] = await answer(reader, 2)
    return result


def runs_in(ran: Path) -> list[tuple[str, int]]:
    """The runs a marker file noted: each task's name, and where the journal was as it ran."""
    return [(name, int(at)) for name, at in (line.split() for line in ran.read_text().splitlines())]


async def test_a_power_cut_runs_each_queued_task_once(daemon: DaemonHandle) -> None:
    """A task that waits in line runs once, whatever the point of a cut: its command is durable
    when it is acknowledged ``pending`` (the restarted daemon runs it, if it had not run), and
    it is out of the line on disk, durably, before it runs (the restarted daemon does not run
    it again). Each run notes its name, and where the journal was, in a marker file, which is
    taken to have been kept up to the cut."""
    journal, ran, gate = daemon.root / "journal", daemon.root / "ran", make_gate(daemon.root)
    names = [f"q{number}" for number in range(QUEUED)]
    queued_at = {}
    with trio.fail_after(60):
        async with daemon.running(
            "--max-running", "1", agent=False, wrapper=power_cut.journalled_argv(journal), stop=False
        ) as process:
            for name in names:
                hold = f"; read x < {gate}" if name == names[0] else ""
                cmd = f"echo {name} $(wc -l < {journal}) >> {ran}{hold}"
                started = await call_tool(daemon, "run", cmd=cmd, name=name, wait_seconds=0)
                state = started["structuredContent"]["state"]
                assert state == ("running" if name == names[0] else "pending"), started
                if state == "pending":
                    queued_at[name] = journal_length(journal)
            await release_gate(gate)
            for name in names:
                ended = await call_tool(daemon, "status", id=name, wait_seconds=30)
                assert ended["structuredContent"]["state"] == "done", ended
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
    runs = runs_in(ran)
    assert sorted(name for name, _ in runs) == names
    entries = power_cut.entries(journal)
    wrong = {}
    for number, cut in enumerate(sorted({*queued_at.values(), *(at for _, at in runs)})):
        restarted = DaemonHandle.under(daemon.root / f"cut{number}")
        restarted.root.mkdir()
        if not power_cut.rebuild(entries[:cut], daemon.root, daemon.state_dir.name, restarted.state_dir):
            continue
        ran.write_text("".join(f"{name} {at}\n" for name, at in runs if at <= cut))
        try:
            with trio.fail_after(60):
                async with restarted.running("--max-running", "1", agent=False):
                    for name in names:  # each one the cut left known ends (its turn may come first)
                        await call_tool(restarted, "status", id=name, wait_seconds=30)
        finally:
            remove_task_cgroups(restarted.state_dir)
        counts = Counter(name for name, _ in runs_in(ran))
        wrong[cut] = {
            name: counts[name]
            for name in names
            if counts[name] > 1 or (counts[name] == 0 and queued_at.get(name, cut + 1) <= cut)
        }
    assert wrong and not any(wrong.values()), (
        f"the runs of tasks that ran twice, or that were acknowledged pending and never ran, "
        f"by the journal entry a cut came after: {wrong}"
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
    and the turn's closing record in the turn log."""
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
    last = TurnLog.read_tail(after / TURN_LOG).last
    assert last is not None, (after / TURN_LOG).read_bytes()
    assert (last.turn, last.outcome, last.delivered, last.session_id) == (1, "completed", True, "session-1")


async def test_a_watched_task_whose_record_a_cut_left_empty_is_still_watched(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    """A power cut left the records of two watched tasks empty (their loose ends too): one's
    match wake was composed and owed, the other's line printed after the daemon died. Both
    are told, each under its run's own id."""
    tasks_dir = daemon.state_dir / "bash-tasks"
    go = daemon.root / "go"
    os.mkfifo(go)
    async with daemon.running(stop=False) as process:  # no agent socket served: its wakes wait
        for name, cmd in (("composed", "echo hit one"), ("unseen", f"read line < {go}; echo hit two")):
            stream, reader = await open_raw_session(daemon.socket)
            async with stream:
                await send(stream, run_request(2, cmd=cmd, name=name, notify_on="^hit", wait_seconds=0))
                await answer(reader, 2)
        with trio.fail_after(30):
            await wait_until(lambda: b'"composed":1' in _watch_state(tasks_dir, "composed"), tasks_dir)
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    await trio.to_thread.run_sync(go.write_text, "go\n")
    with trio.fail_after(30):
        await wait_until(lambda: daemon.task_file("unseen", ".exit").read_bytes().strip(), tasks_dir)
    serials = {}
    for name in ("composed", "unseen"):
        serials[name] = json.loads(daemon.task_file(name, ".json").read_bytes())["serial"]
        daemon.task_file(name, ".json").write_bytes(b"")
        daemon.loose_end(name).write_bytes(b"")

    async with agent.serving(), daemon.running():
        with trio.fail_after(30):
            await agent.wait_for_ends(
                {f"composed:{serials['composed']}:m1", f"unseen:{serials['unseen']}:m1"}
            )
    bodies = {w.end_id: w.body for w in agent.wakes}
    assert "hit one" in bodies[f"composed:{serials['composed']}:m1"]
    assert "hit two" in bodies[f"unseen:{serials['unseen']}:m1"]


def _watch_state(tasks_dir: Path, task_id: str) -> bytes:
    for path in tasks_dir.glob(f"{task_id}@*.watch"):
        return path.read_bytes()
    return b""


def test_the_model_keeps_what_the_later_called_of_two_overlapping_fsyncs_made_durable(
    short_tmp: Path,
) -> None:
    """`power_cut`'s own rule: an fsync called while another of the same file is under way, and
    returning first, made the file's newer data durable; the earlier call, returning after it,
    does not undo that (the daemon's threads sync the same directories at once)."""
    journal, state = short_tmp / "journal", short_tmp / "state"
    armed, snapshot_taken, release = threading.Event(), threading.Event(), threading.Event()
    real_fsync = os.fsync

    def held_once(fd: int) -> None:  # the first fsync once armed waits, its snapshot taken, until released
        if armed.is_set() and not snapshot_taken.is_set():
            snapshot_taken.set()
            release.wait(30)
        real_fsync(fd)

    with mock.patch.object(os, "fsync", held_once), power_cut.journalling(journal):
        state.mkdir()
        fsync_dir(short_tmp)
        fd = os.open(state / "file", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"old")
            earlier = threading.Thread(target=os.fsync, args=(fd,))
            armed.set()
            earlier.start()
            assert snapshot_taken.wait(30)
            os.pwrite(fd, b"new", 0)
            os.fsync(fd)
            release.set()
            earlier.join()
        finally:
            os.close(fd)
        fsync_dir(state)
    after = short_tmp / "after"
    assert power_cut.rebuild(power_cut.entries(journal), short_tmp, state.name, after)
    assert (after / "file").read_bytes() == b"new"
