"""A limit on running tasks (``hive-bash-daemon --max-running``): a task past it is ``pending``,
listed with its place in line, starts in order as running tasks end, its timeout counting from
its start; a stop takes it out of the line; a restart keeps the order.

The line's bookkeeping is proven alone (Hypothesis); the rest in-process, the tools over a real
manager and real tasks; a SIGKILLed daemon and the CLI with a real daemon."""

from __future__ import annotations

import itertools
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from hive.bash import BashTools, TaskRecord, TaskStore
from hive.bash._line import RunLine
from hive.bash._task import Task
from tests.helpers.daemon import DaemonHandle
from tests.helpers.gates import make_gate, release_gate
from tests.helpers.results import call, structured
from tests.helpers.tools import serving_tools

GUARD = 30


# -- the line alone ----------------------------------------------------------------------------------


class LineMachine(RuleBasedStateMachine):
    """Callers start tasks, their files land, running tasks end, stops take waiting ones out:
    never more than the limit run, tasks start in the order they came, and none waits while
    a place is free and it may start."""

    @initialize(limit=st.integers(min_value=1, max_value=3))
    def setup(self, limit: int) -> None:
        self.line = RunLine(limit)
        self.limit = limit
        self.running: list[Task] = []
        self.unsaved: list[Task] = []
        self.waiting: list[Task] = []
        self.started: list[int] = []
        self.count = 0

    def _task(self, number: int | None) -> Task:
        self.count += 1
        return Task(
            TaskRecord(
                id=f"t{self.count}", serial=f"s{self.count}", cmd="true", cwd="/", created_at=0, queued=number
            )
        )

    def _start_due(self) -> None:
        for task in self.line.due():
            assert task.record.queued is not None
            self.waiting.remove(task)
            self.running.append(task)
            self.started.append(task.record.queued)

    @rule()
    def start(self) -> None:
        if self.line.must_wait():
            task = self._task(self.line.take_number())
            self.line.join(task, saved=False)
            self.unsaved.append(task)
            self.waiting.append(task)
        else:
            task = self._task(None)
            self.line.occupy(task.key)
            self.running.append(task)

    @precondition(lambda self: self.unsaved)
    @rule(data=st.data())
    def files_land(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.unsaved))
        self.unsaved.remove(task)
        if self.line.saved(task.key):
            self.waiting.remove(task)  # a stop came while its files were being saved
        self._start_due()

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def end(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.running))
        self.running.remove(task)
        self.line.vacate(task.key)
        self._start_due()

    @precondition(lambda self: self.waiting)
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        task = data.draw(st.sampled_from(self.waiting))
        assert self.line.waits(task.key)
        if self.line.leave(task.key):
            self.waiting.remove(task)
        else:
            assert task in self.unsaved  # it leaves once its files are saved

    @invariant()
    def at_most_the_limit_run(self) -> None:
        assert self.line.running == len(self.running) <= self.limit

    @invariant()
    def tasks_start_in_the_order_they_came(self) -> None:
        assert self.started == sorted(self.started)

    @invariant()
    def places_are_the_order_of_the_line(self) -> None:
        in_line = sorted(self.waiting, key=lambda t: t.record.queued or 0)
        assert [self.line.place(t.key) for t in in_line] == list(range(1, len(in_line) + 1))

    @invariant()
    def no_task_waits_for_nothing(self) -> None:
        if self.waiting and len(self.running) < self.limit:
            head = min(self.waiting, key=lambda t: t.record.queued or 0)
            assert head in self.unsaved


TestLineMachine = LineMachine.TestCase


# -- the tools over a real manager ----------------------------------------------------------------


def _timed(body: str) -> str:
    """``body`` between two lines that say when it began and ended, as the task's own shell tells."""
    return f"echo start $EPOCHREALTIME; {body}; echo end $EPOCHREALTIME"


def _span(out: Path) -> tuple[float, float]:
    """When a `_timed` task began and ended, from its stdout."""
    lines = out.read_text().splitlines()
    times = dict(line.split() for line in lines if line.startswith(("start ", "end ")))
    return float(times["start"]), float(times["end"])


def _one_after_another(outs: list[Path]) -> bool:
    """Whether the `_timed` tasks with these stdout files ran one after another, in this order."""
    spans = [_span(out) for out in outs]
    return all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(spans))


async def _call(tools: BashTools, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
    """A tool's answer as a program reads it (every field: ``full``)."""
    result = await tools.call(tool, args | ({"full": True} if tool != "list" else {}))
    assert not result.is_error, result.text
    return result.text, result.structured


async def _until_started(tools: BashTools, task_id: str) -> dict[str, Any]:
    """The task's status once it has written its first output: it runs (woken by the file's growth)."""
    _, status = await _call(tools, "status", id=task_id, stdout_offset=0, wait_seconds=GUARD)
    assert status["stdout_new"], status
    return status


async def test_tasks_past_the_limit_wait_in_line_and_start_in_order_as_running_ones_end(
    short_tmp: Path,
) -> None:
    gates = {name: make_gate(short_tmp, name) for name in "ab"}
    tasks = short_tmp / "state" / "bash-tasks"
    with trio.fail_after(GUARD):
        async with serving_tools(short_tmp, max_running=1) as tools:
            _, a = await _call(tools, "run", cmd=_timed(f"read x < {gates['a']}"), name="a", wait_seconds=0)
            assert a["state"] == "running" and a["place_in_line"] is None
            # Its inline wait ends while it waits: the answer says so.
            text, b = await _call(
                tools, "run", cmd=_timed(f"read x < {gates['b']}"), name="b", wait_seconds=0.1
            )
            assert (b["state"], b["place_in_line"]) == ("pending", 1)
            assert text.startswith("task queued: id=b (pending: number 1 in line, it starts when a place")
            assert "the daemon runs at most 1 task at once" in text and "It waits in line, then runs" in text
            _, c = await _call(tools, "run", cmd="echo c", name="c", wait_seconds=0)
            _, d = await _call(tools, "run", cmd=_timed("echo d"), name="d", wait_seconds=0)
            assert (c["place_in_line"], d["place_in_line"]) == (2, 3)

            listing, listed = await _call(tools, "list")
            places = {row["id"]: (row["state"], row["place_in_line"]) for row in listed["tasks"]}
            assert places == {
                "a": ("running", None),
                "b": ("pending", 1),
                "c": ("pending", 2),
                "d": ("pending", 3),
            }
            assert "\nc\tpending #2\t-\t-\techo c" in listing
            status_text, status = await _call(tools, "status", id="c")
            assert status_text.startswith("task c: pending: number 2 in line")
            assert (status["pid"], status["started_at"], status["place_in_line"]) == (None, None, 2)

            # A stop takes a waiting task out of the line: it never runs, and those behind move up.
            stop_text, stopped = await _call(tools, "stop", id="c")
            assert (stopped["state"], stopped["exit_code"], stopped["started_at"]) == ("stopped", None, None)
            assert "stopped on request while it waited for a place to run: it never ran" in stop_text
            assert tools.manager.place(tools.manager.get("d")) == 2

            await release_gate(gates["a"])
            await _until_started(tools, "b")
            assert tools.manager.place(tools.manager.get("d")) == 1
            await release_gate(gates["b"])
            _, done_d = await _call(tools, "status", id="d", wait_seconds=GUARD)
    assert done_d["state"] == "done" and "\nd\n" in done_d["stdout"]["tail"]
    assert _one_after_another([tasks / f"{name}.out" for name in "abd"])
    assert (tasks / "c.out").read_bytes() == b""


async def test_a_pending_tasks_timeout_counts_from_its_start(short_tmp: Path) -> None:
    gate = make_gate(short_tmp)
    skipped = [0.0]

    def clock() -> float:
        return trio.current_time() + 1e9 + skipped[0]

    with trio.fail_after(GUARD):
        async with serving_tools(short_tmp, max_running=1, clock=clock) as tools:
            await _call(tools, "run", cmd=f"read x < {gate}", name="first", wait_seconds=0)
            _, late = await _call(
                tools, "run", cmd="echo up; sleep 30", name="late", timeout_secs=0.2, wait_seconds=0
            )
            assert late["state"] == "pending"
            # Ten minutes pass in line (as its record's clock tells): its timeout has not started.
            skipped[0] = 600
            await release_gate(gate)
            await _until_started(tools, "late")
            _, ended = await _call(tools, "status", id="late", wait_seconds=GUARD)
    assert ended["state"] == "timed_out"
    assert ended["started_at"] - ended["created_at"] >= 600
    assert ended["ended_at"] - ended["started_at"] >= 0.2


async def test_a_task_that_cannot_be_started_when_its_turn_comes_ends_interrupted_and_the_next_starts(
    short_tmp: Path,
) -> None:
    gate = make_gate(short_tmp)
    with trio.fail_after(GUARD):
        async with serving_tools(short_tmp, max_running=1) as tools:
            await _call(tools, "run", cmd=f"read x < {gate}", name="first", wait_seconds=0)
            await _call(tools, "run", cmd="echo lost", name="lost", wait_seconds=0)
            await _call(tools, "run", cmd="echo next", name="next", wait_seconds=0)
            (short_tmp / "state" / "bash-tasks" / "lost.cmd").unlink()
            await release_gate(gate)
            lost_text, lost = await _call(tools, "status", id="lost", wait_seconds=GUARD)
            _, after = await _call(tools, "status", id="next", wait_seconds=GUARD)
    assert lost["state"] == "interrupted" and lost["pid"] is None
    assert "interrupted: it could not be started when its turn in line came" in lost_text
    why = "it could not be started when its turn came: "
    assert any(note.startswith(why) for note in lost["notes"]), lost["notes"]
    assert (after["state"], after["stdout"]["tail"]) == ("done", "next\n")


@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
async def test_a_restarted_manager_keeps_the_line_in_its_order(short_tmp: Path) -> None:
    store = TaskStore(short_tmp / "state")
    gate = make_gate(short_tmp)
    names = ("first", "second", "third", "fourth")
    with trio.fail_after(GUARD):
        async with serving_tools(short_tmp, store=store, max_running=1) as tools:
            await _call(tools, "run", cmd=_timed(f"read x < {gate}"), name="first", wait_seconds=0)
            for name in names[1:3]:
                await _call(tools, "run", cmd=_timed(f"echo {name}"), name=name, wait_seconds=0)
        # An orderly stop leaves the tasks, running and waiting, for the next start.
        async with serving_tools(short_tmp, store=store, max_running=1) as tools:
            manager = tools.manager
            assert manager.get("first").record.state.value == "running"
            assert [manager.place(manager.get(n)) for n in names[1:3]] == [1, 2]
            _, fourth = await _call(tools, "run", cmd=_timed("echo fourth"), name="fourth", wait_seconds=0)
            assert fourth["place_in_line"] == 3
            await release_gate(gate)
            _, last = await _call(tools, "status", id="fourth", wait_seconds=GUARD)
    assert last["state"] == "done"
    assert _one_after_another([store.out_path(name) for name in names])


# -- a real daemon -------------------------------------------------------------------------------


async def _hive_bash(daemon: DaemonHandle, *args: str) -> tuple[int, str]:
    done = await trio.run_process(
        [sys.executable, "-m", "hive.cli", "bash", args[0], "--socket", str(daemon.socket), *args[1:]],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return done.returncode, done.stdout.decode() + done.stderr.decode()


async def test_the_line_survives_a_daemon_sigkill_in_its_order_and_the_cli_shows_it(
    daemon: DaemonHandle,
) -> None:
    gate = make_gate(daemon.root)
    with trio.fail_after(60):
        async with daemon.running("--max-running", "1", agent=False, stop=False) as first:
            code, out = await _hive_bash(
                daemon, "run", "--name", "a", "--wait", "0", _timed(f"read x < {gate}")
            )
            assert code == 0 and out.startswith("task started: id=a"), out
            code, out = await _hive_bash(daemon, "run", "--name", "b", "--wait", "0", _timed("echo b"))
            assert code == 0 and out.startswith("task queued: id=b (pending, number 1 in line)"), out
            assert "It waits in line, then runs in the background" in out
            await _hive_bash(daemon, "run", "--name", "c", "--wait", "0", _timed("echo c"))
            code, listing = await _hive_bash(daemon, "ls")
            assert code == 0 and "\tpending #1\t" in listing and "\tpending #2\t" in listing, listing
            os.kill(first.pid, signal.SIGKILL)
            await first.wait()
        async with daemon.running("--max-running", "1", agent=False), daemon.session() as session:
            b = structured(await call(session, "status", id="b"))
            c = structured(await call(session, "status", id="c"))
            assert (b["place_in_line"], c["place_in_line"]) == (1, 2)
            await release_gate(gate)
            ends = [structured(await call(session, "status", id=n, wait_seconds=30)) for n in "abc"]
    assert [e["state"] for e in ends] == ["done", "done", "done"]
    assert _one_after_another([daemon.task_file(name, ".out") for name in "abc"])
