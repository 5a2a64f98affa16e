"""A daemon that goes down (SIGKILL or an orderly stop) and comes back: nothing is lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.shared.exceptions import MCPError

from tests.helpers.daemon import DaemonHandle, group_alive
from tests.helpers.forked_daemon import forked_shared_daemon
from tests.helpers.gates import gated, make_gate, open_gate, sigkill, start_gated
from tests.helpers.inotify import wait_until
from tests.helpers.listener import AgentListener
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of

pytestmark = pytest.mark.forked_daemon


async def loose_end_gone(daemon: DaemonHandle, task_id: str) -> None:
    """The daemon drops a loose end once the wake is acknowledged, just after the agent has it:
    wait for that (a stop in between leaves it for a repeat on the next start, as it should)."""
    path = daemon.loose_end(task_id)
    with trio.fail_after(20):
        await wait_until(lambda: not path.exists(), path.parent)


async def gated_past_a_sigkill(daemon: DaemonHandle, name: str, code: int = 7) -> tuple[Path, int]:
    """A task waiting on a gate, started by a daemon then SIGKILLed: the gate and the task's pid."""
    gate = make_gate(daemon.root)
    async with daemon.running(stop=False) as first:
        pid = await start_gated(daemon, name, gate, code)
        await sigkill(first)
    return gate, pid


def ended_as(daemon: DaemonHandle, task_id: str) -> tuple[str, int | None]:
    """The state and exit code the task's record on disk says."""
    record = json.loads(daemon.task_file(task_id, ".json").read_text())
    return record["state"], record["exit_code"]


async def test_sigkilled_daemon_re_adopts_a_running_task_and_learns_its_exit_status(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    async with agent.serving():
        gate, pid = await gated_past_a_sigkill(daemon, "survivor")
        assert group_alive(pid), "the task must outlive its daemon"
        async with daemon.running(), daemon.session() as session:
            status = structured(await call(session, "status", id="survivor"))
            assert status["state"] == "running"
            assert status["pid"] == pid
            open_gate(gate)
            wake = await agent.only_wake("bash-task-survivor")
            assert "exit code 7" in wake.body
            assert "got go" in wake.body
            status = structured(await call(session, "status", id="survivor"))
            assert status["state"] == "done"
            assert status["exit_code"] == 7
            assert status["stdout"]["tail"] == "got go\n"
            await loose_end_gone(daemon, "survivor")
    assert ended_as(daemon, "survivor") == ("done", 7)


async def test_a_running_task_whose_record_was_lost_is_adopted_by_its_mark(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    # As if the daemon died between starting the task and saving its record.
    gate, pid = await gated_past_a_sigkill(daemon, "unrecorded", 4)
    daemon.task_file("unrecorded", ".json").unlink()
    async with agent.serving(), daemon.running(), daemon.session() as session:
        status = structured(await call(session, "status", id="unrecorded"))
        assert (status["state"], status["pid"]) == ("running", pid)
        assert status["cmd"] == gated(gate, 4)
        assert any("record was lost" in note for note in status["notes"])
        open_gate(gate)
        wake = await agent.only_wake("bash-task-unrecorded")
        assert "exit code 4" in wake.body
    assert ended_as(daemon, "unrecorded") == ("done", 4)


async def test_task_that_ended_while_the_daemon_was_down_is_recovered_with_its_exit_status(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate, pid = await gated_past_a_sigkill(daemon, "quiet", 3)
    open_gate(gate)
    await wait_exited(pid)
    async with agent.serving(), daemon.running(), daemon.session() as session:
        wake = await agent.only_wake("bash-task-quiet")
        assert "done, exit code 3" in wake.body
        status = structured(await call(session, "status", id="quiet"))
        assert (status["state"], status["exit_code"]) == ("done", 3)
        assert any("ended while the daemon was down" in note for note in status["notes"])


async def running_record(daemon: DaemonHandle, task_id: str) -> dict[str, Any]:
    """The task's record once the one on disk has its process and start time."""
    path = daemon.task_file(task_id, ".json")

    def saved_running() -> dict[str, Any] | None:
        record: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
        return record if record.get("pid") and record.get("started_at") else None

    return await wait_until(saved_running, path.parent)


async def hive_bash_status(daemon: DaemonHandle, task_id: str) -> subprocess.CompletedProcess[bytes]:
    """``hive bash status TASK_ID --json``, run to its end."""
    argv = ["bash", "status", task_id, "--json", "--socket", str(daemon.socket)]
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *argv], capture_stdout=True, capture_stderr=True, check=False
    )


async def test_a_task_that_ended_while_the_daemon_was_down_keeps_its_end_and_its_verdict(
    daemon: DaemonHandle,
) -> None:
    # Both under a timeout of 2 s: "early" ends before its deadline, "late" after it, both while
    # the daemon is down; the daemon comes back after both deadlines.
    timeout = 2.0
    gates = {name: make_gate(daemon.root, name) for name in ("early", "late")}
    async with daemon.running(agent=False, stop=False) as first, daemon.session() as session:
        for name, gate in gates.items():
            started = structured(
                await call(
                    session, "run", cmd=gated(gate, 0), name=name, timeout_secs=timeout, wait_seconds=0
                )
            )
            assert started["state"] == "running"
        # Killed once each record says the task runs, as a daemon that dies later would leave it.
        with trio.fail_after(20):
            records = {name: await running_record(daemon, name) for name in gates}
        await sigkill(first)
    pids = {name: record["pid"] for name, record in records.items()}
    deadlines = {name: record["started_at"] + timeout for name, record in records.items()}

    async def until(wall_time: float) -> None:
        await trio.sleep(max(0.0, wall_time - time.time()))

    last_acts = {}
    with trio.fail_after(20):
        for name, gate in gates.items():
            if name == "late":
                # Well past it: a file's time is the kernel's coarse clock, a tick behind.
                await until(deadlines[name] + 0.05)
            open_gate(gate)
            await wait_exited(pids[name])
            # The wrapper's write of the status is the task's last act.
            last_acts[name] = daemon.task_file(name, ".exit").stat().st_mtime
        assert last_acts["early"] < deadlines["early"]
        await until(max(deadlines.values()))
    async with daemon.running(agent=False):
        states = {name: await hive_bash_status(daemon, name) for name in gates}
    early, late = (json.loads(states[name].stdout) for name in ("early", "late"))
    assert (early["state"], early["exit_code"], states["early"].returncode) == ("done", 0, 0), early
    assert (late["state"], late["exit_code"], states["late"].returncode) == ("timed_out", 0, 124), late
    for name in gates:
        recorded = json.loads(daemon.task_file(name, ".json").read_text())
        assert abs(recorded["ended_at"] - last_acts[name]) < 0.1, (name, recorded, last_acts[name])


async def test_task_killed_while_the_daemon_was_down_is_interrupted_and_woken(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    _, pid = await gated_past_a_sigkill(daemon, "victim")
    # A machine restart, in effect: the whole group dies without writing an exit status.
    os.killpg(pid, signal.SIGKILL)
    await wait_exited(pid)
    async with agent.serving(), daemon.running(), daemon.session() as session:
        wake = await agent.only_wake("bash-task-victim")
        assert "interrupted" in wake.body
        status = structured(await call(session, "status", id="victim"))
        assert status["state"] == "interrupted"
        assert status["exit_code"] is None
        await loose_end_gone(daemon, "victim")


async def test_orderly_shutdown_leaves_tasks_running_for_the_next_start(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate = make_gate(daemon.root)
    async with agent.serving():
        async with daemon.running() as first:
            pid = await start_gated(daemon, "keeper", gate, code=0)
        assert first.returncode == 0
        assert group_alive(pid)
        async with daemon.running(), daemon.session() as session:
            assert structured(await call(session, "status", id="keeper"))["state"] == "running"
            open_gate(gate)
            ended = structured(await call(session, "status", id="keeper", wait_seconds=20))
            assert (ended["state"], ended["exit_code"]) == ("done", 0)


async def test_wake_owed_before_a_restart_is_sent_after_it(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate = make_gate(daemon.root)
    # No agent socket at first: the end is owed, and only the loose end remembers it.
    async with daemon.running(agent=False):
        pid = await start_gated(daemon, "owed", gate, code=0)
        open_gate(gate, "owed")
        await wait_exited(pid)
    loose_end = json.loads(daemon.loose_end("owed").read_text())
    assert loose_end["task_id"] == "owed"
    async with agent.serving(), daemon.running():
        wake = await agent.only_wake("bash-task-owed")
        assert "got owed" in wake.body
        await loose_end_gone(daemon, "owed")


@pytest.fixture(scope="module")
def retrying() -> Iterator[DaemonHandle]:
    """The daemon of the tests of wakes retried: its agent socket is served by each test in turn."""
    with forked_shared_daemon("--wake-retry-max", "0.2", agent=True) as handle:
        yield handle


async def test_wakes_wait_for_an_absent_agent_socket_and_arrive_once_each(
    retrying: DaemonHandle, short_tmp: Path
) -> None:
    daemon, agent = retrying, AgentListener(retrying.agent_socket)
    names = [f"t{i}" for i in range(4)]
    gates = {name: make_gate(short_tmp, name) for name in names}
    async with daemon.session() as session:
        pids = [await start_gated(daemon, name, gates[name], code=0) for name in names]
        for name in names:
            open_gate(gates[name])
        for pid in pids:
            await wait_exited(pid)
        assert not agent.path.exists()
        async with agent.serving():
            with trio.fail_after(20):
                await agent.wait_for(len(names))
            # A later wake comes after any repeat of the earlier ones would have.
            await call(session, "run", cmd="true", name="last", wait_seconds=0)
            with trio.fail_after(20):
                await agent.wait_for(len(names) + 1)
        # Each loose end goes once its wake is acknowledged.
        with trio.fail_after(20):
            for name in names:
                gone = daemon.loose_end(name)
                await wait_until(lambda gone=gone: not gone.exists(), gone.parent)
    assert sorted(agent.senders()) == sorted([*(f"bash-task-{n}" for n in names), "bash-task-last"])


async def test_a_refused_wake_is_retried_until_acknowledged(retrying: DaemonHandle) -> None:
    daemon, agent = retrying, AgentListener(retrying.agent_socket)
    agent.refuse = True
    async with agent.serving(), daemon.session() as session:
        await call(session, "run", cmd="true", name="refused", wait_seconds=0)
        with trio.fail_after(20):
            await agent.wait_for_refusals(2)
        assert daemon.loose_end("refused").exists()
        agent.refuse = False
        await agent.only_wake("bash-task-refused")
        status = await call(session, "list")
        assert "refused" in text_of(status)


async def test_a_stop_is_saved_before_its_sigint_so_a_sigkill_right_after_it_loses_nothing(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    ready = make_gate(daemon.root, "ready")
    async with agent.serving():
        async with daemon.running(stop=False) as first, daemon.session() as session:
            # The task SIGKILLs the daemon the moment its SIGINT arrives: whatever the daemon
            # had not saved by then is lost. (`wait` returns at once for a trapped signal.)
            cmd = (
                f"trap 'kill -KILL {first.pid}; kill $!; exit 9' INT; "
                f"sleep 300 & echo ready > {ready}; wait $!"
            )
            await call(session, "run", cmd=cmd, name="halted", wait_seconds=0)
            with trio.fail_after(20):
                await trio.to_thread.run_sync(ready.read_text, abandon_on_cancel=True)

            async def stop() -> None:
                with contextlib.suppress(MCPError):  # the daemon dies before it answers
                    await call(session, "stop", id="halted")

            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stop)
                    await first.wait()
                    nursery.cancel_scope.cancel()
        record = json.loads(daemon.task_file("halted", ".json").read_text())
        assert record["stop_reason"] == "requested", record
        assert record["stop_started_at"] is not None
        async with daemon.running(), daemon.session() as session:
            ended = structured(await call(session, "status", id="halted", wait_seconds=20))
            with trio.fail_after(20):
                (wake,) = await agent.wait_for(1)
    assert (ended["state"], ended["exit_code"]) == ("stopped", 9)
    assert wake.sender == "bash-task-halted"
    assert "stopped" in wake.body
