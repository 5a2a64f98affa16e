"""Every end reaches the agent: through a client that went away mid-wait, across a SIGKILL of the
daemon, from a task whose record is gone, and with the daemon at its open-files limit."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from hive.agent_socket import AgentRequest, Wake, serve_agent_socket
from hive.bash import serial_from_files
from tests.helpers.daemon import DaemonHandle
from tests.helpers.forked_daemon import ForkedDaemonHandle
from tests.helpers.gates import make_gate, sigkill
from tests.helpers.jsonrpc import (
    answer,
    open_raw_session,
    run_request,
    send,
)
from tests.helpers.listener import AgentListener
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of

pytestmark = pytest.mark.forked_daemon


async def read_pid(fifo: Path) -> int:
    """The pid a task writes into ``fifo`` (opening a FIFO blocks until the task opens it too)."""

    def read() -> int:
        with open(fifo) as f:
            return int(f.readline())

    return await trio.to_thread.run_sync(read, abandon_on_cancel=True)


async def release(gate: Path) -> None:
    """Let a task waiting on ``gate`` go on (opening a FIFO for writing blocks until it reads)."""

    def write() -> None:
        with open(gate, "w") as f:
            f.write("go\n")

    await trio.to_thread.run_sync(write, abandon_on_cancel=True)


def signalled(ready: Path, gate: Path, code: int) -> str:
    """A task that writes its wrapper's pid to ``ready``, then waits on ``gate``."""
    return f"echo $$ > {ready}; read line < {gate}; exit {code}"


def record_of(daemon: DaemonHandle, task_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(daemon.task_file(task_id, ".json").read_text())
    return record


@contextlib.asynccontextmanager
async def running_inline(daemon: DaemonHandle, request_id: int, **run: Any) -> AsyncIterator[None]:
    """A raw session whose `run` (``run``: its arguments) of a `signalled` task waits inline,
    open while the block runs."""
    stream, _reader = await open_raw_session(daemon.socket)
    async with stream:
        await send(stream, run_request(request_id, **run))
        yield


async def test_an_end_answered_to_a_client_that_went_away_mid_wait_is_still_woken(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    # Claude Code, its turn stopped mid-tool, closes the relay's stdin and sends no cancel: the
    # relay shuts its side of the connection, and the answer it is still sent reaches nobody.
    gate, ready = make_gate(daemon.root), make_gate(daemon.root, "ready")
    async with agent.serving(), daemon.running():
        stream, reader = await open_raw_session(daemon.socket)
        async with stream:
            await send(stream, run_request(2, cmd=signalled(ready, gate, 5), name="gone", wait_seconds=20))
            with trio.fail_after(20):
                await read_pid(ready)
            assert daemon.loose_end("gone").exists(), "an end is owed from the task's start"
            await stream.send_eof()
            with trio.fail_after(20):
                await release(gate)
                ended = (await answer(reader, 2))["structuredContent"]
            assert (ended["state"], ended["exit_code"]) == ("done", 5)
            with trio.fail_after(20):
                (wake,) = await agent.wait_for(1)
    assert wake.sender == "bash-task-gone"
    assert "exit code 5" in wake.body
    assert wake.end_id == f"gone:{record_of(daemon, 'gone')['serial']}"


# The task's wrapper outlives the daemon that started it, by design: its Popen is collected still running.
@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
async def test_a_task_that_ends_while_the_daemon_is_down_mid_run_is_recovered_and_woken(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    # The daemon is SIGKILLed while `run` waits inline; the task ends before the restart.
    gate, ready = make_gate(daemon.root), make_gate(daemon.root, "ready")
    async with agent.serving():
        run = {"cmd": signalled(ready, gate, 3), "name": "mid", "wait_seconds": 5}
        async with daemon.running(stop=False) as first, running_inline(daemon, 2, **run):
            with trio.fail_after(20):
                pid = await read_pid(ready)
            await sigkill(first)
        with trio.fail_after(20):
            await release(gate)
        await wait_exited(pid)
        async with daemon.running(), daemon.session() as session:
            with trio.fail_after(20):
                (wake,) = await agent.wait_for(1)
            status = structured(await call(session, "status", id="mid"))
    assert (status["state"], status["exit_code"]) == ("done", 3)
    assert wake.sender == "bash-task-mid"
    assert "done, exit code 3" in wake.body
    assert wake.end_id == f"mid:{record_of(daemon, 'mid')['serial']}"


async def test_a_task_re_adopted_after_a_sigkill_mid_run_keeps_its_timeout(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate, ready = make_gate(daemon.root), make_gate(daemon.root, "ready")
    pid = None
    try:
        async with agent.serving():
            async with daemon.running(stop=False) as first:
                cmd = signalled(ready, gate, 0)
                async with running_inline(daemon, 2, cmd=cmd, name="timed", wait_seconds=5, timeout_secs=1):
                    with trio.fail_after(20):
                        pid = await read_pid(ready)
                    await sigkill(first)
            async with daemon.running(), daemon.session() as session:
                status = structured(await call(session, "status", id="timed", wait_seconds=20))
        assert status["state"] == "timed_out", status
        assert status["timeout_secs"] == 1
        assert status["started_at"] is not None
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


async def test_a_task_whose_record_is_gone_is_recovered_from_its_files(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    async with daemon.running(agent=False), daemon.session() as session:
        ended = structured(await call(session, "run", cmd="echo hi; exit 6", name="filed", wait_seconds=20))
        assert (ended["state"], ended["exit_code"]) == ("done", 6)
    daemon.task_file("filed", ".json").unlink()
    async with agent.serving(), daemon.running(), daemon.session() as session:
        with trio.fail_after(20):
            (wake,) = await agent.wait_for(1)
        status = structured(await call(session, "status", id="filed"))
        listed = text_of(await call(session, "list"))
    assert (status["state"], status["exit_code"]) == ("done", 6)
    assert status["cmd"] == "echo hi; exit 6"
    assert status["stdout"]["tail"] == "hi\n"
    assert any("recovered from its files" in note for note in status["notes"])
    assert "filed" in listed
    assert wake.sender == "bash-task-filed"
    assert wake.end_id == f"filed:{record_of(daemon, 'filed')['serial']}"


async def test_a_run_recovered_from_its_files_twice_has_one_end_id(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    # A recovery that sends the end and dies before its record lands leaves the next recovery
    # the same files to go by: the end must carry the same id, or the agent cannot drop it
    # as a repeat. (Its record is removed here after each life, as such a death leaves it.)
    async with daemon.running(agent=False), daemon.session() as session:
        await call(session, "run", cmd="exit 6", name="twice", wait_seconds=20)
    end_ids = []
    for _ in range(2):
        daemon.task_file("twice", ".json").unlink()
        async with agent.serving(), daemon.running():
            with trio.fail_after(20):
                (wake,) = await agent.wait_for(1)
            end_ids.append(wake.end_id)
        agent.wakes.clear()
    assert end_ids[0] == end_ids[1] == f"twice:{record_of(daemon, 'twice')['serial']}"


def test_a_serial_from_files_is_the_same_for_the_same_files(tmp_path: Path) -> None:
    (tmp_path / "a.cmd").write_text("true")
    (tmp_path / "b.cmd").write_text("true")
    first = serial_from_files([tmp_path / "a.cmd"], "a")
    assert first == serial_from_files([tmp_path / "missing", tmp_path / "a.cmd"], "a")
    assert re.fullmatch("[0-9a-f]{16}", first)
    assert first != serial_from_files([tmp_path / "b.cmd"], "b")
    # No file at all: nothing to go by, a serial of its own each time.
    assert serial_from_files([tmp_path / "missing"], "a") != serial_from_files([tmp_path / "missing"], "a")


async def test_at_its_open_files_limit_the_daemon_refuses_tasks_and_says_why(
    daemon: ForkedDaemonHandle,
) -> None:
    # Hard limit = soft limit: the daemon cannot raise it, so `run` must stop short of it.
    pids: list[int] = []
    try:
        async with daemon.running(agent=False, nofile=(128, 128)), daemon.session() as session:
            refusal = None
            for i in range(200):
                result = await call(session, "run", cmd="sleep 300", name=f"fd{i}", wait_seconds=0)
                if result.is_error:
                    refusal = text_of(result)
                    break
                pids.append(structured(await call(session, "status", id=f"fd{i}"))["pid"])
            assert refusal is not None, "200 tasks started under a limit of 128 open files"
            assert "task limit" in refusal
            assert "free space" not in refusal
            assert structured(result)["error"] == "TaskLimit"
            # Every task that was said to have started has its record and its loose end.
            for i in range(len(pids)):
                assert daemon.task_file(f"fd{i}", ".json").exists()
                assert daemon.loose_end(f"fd{i}").exists()
            # The refused one left nothing behind, and the daemon still answers.
            assert not daemon.task_file(f"fd{len(pids)}", ".json").exists()
            assert structured(await call(session, "list", limit=0))["total"] == len(pids)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


async def test_a_wake_whose_acknowledgement_the_daemon_never_read_comes_again_with_the_same_end_id(
    daemon: DaemonHandle,
) -> None:
    gate = make_gate(daemon.root)
    wakes: list[Wake] = []
    second = trio.Event()
    processes: list[trio.Process] = []

    async def take(request: AgentRequest) -> None:
        if isinstance(request, Wake):
            wakes.append(request)
            if len(wakes) == 1:
                # The daemon dies before it can read the acknowledgement.
                os.kill(processes[0].pid, signal.SIGKILL)
            else:
                second.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, daemon.agent_socket, take)
        async with daemon.running(stop=False) as first:
            processes.append(first)
            stream, reader = await open_raw_session(daemon.socket)
            async with stream:
                cmd = f"read line < {gate}; echo once; exit 4"
                await send(stream, run_request(2, cmd=cmd, name="twice", wait_seconds=0))
                assert (await answer(reader, 2))["structuredContent"]["state"] == "running"
            with trio.fail_after(20):
                await release(gate)
                await first.wait()
        async with daemon.running():
            with trio.fail_after(20):
                await second.wait()
        nursery.cancel_scope.cancel()
    assert [w.sender for w in wakes] == ["bash-task-twice", "bash-task-twice"]
    assert wakes[0].end_id == wakes[1].end_id == f"twice:{record_of(daemon, 'twice')['serial']}"
    assert "exit code 4" in wakes[1].body


async def _first_run_ended_unacknowledged(daemon: DaemonHandle, agent: AgentListener) -> str:
    """Run `x` (exit 3) whose wake the agent refuses: it has ended and is owed. Its serial."""
    stream, reader = await open_raw_session(daemon.socket)
    async with stream:
        await send(stream, run_request(2, cmd="exit 3", name="x", wait_seconds=0))
        await answer(reader, 2)
    with trio.fail_after(20):
        await agent.wait_for_refusals(1)
    serial: str = record_of(daemon, "x")["serial"]
    return serial


async def test_a_reused_name_keeps_the_previous_runs_end_owed_when_its_answer_reaches_nobody(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate, ready = make_gate(daemon.root), make_gate(daemon.root, "ready")
    agent.refuse = True
    async with agent.serving(), daemon.running():
        first = await _first_run_ended_unacknowledged(daemon, agent)
        stream, reader = await open_raw_session(daemon.socket)
        async with stream:
            await send(stream, run_request(3, cmd=signalled(ready, gate, 4), name="x", wait_seconds=20))
            with trio.fail_after(20):
                await read_pid(ready)
            assert daemon.loose_end("x").exists()
            assert (daemon.state_dir / "mcp-loose-ends" / f"bash-task-x@{first}.json").exists()
            await stream.send_eof()  # the client goes away before the answer comes
            with trio.fail_after(20):
                await release(gate)
                ended = (await answer(reader, 3))["structuredContent"]
        assert ended["previous"] == {"id": "x", "state": "done", "exit_code": 3}
        second = record_of(daemon, "x")["serial"]
        agent.refuse = False
        with trio.fail_after(30):
            while {w.end_id for w in agent.wakes} < {f"x:{first}", f"x:{second}"}:
                await agent.wait_for(len(agent.wakes) + 1)
    by_end = {w.end_id: w for w in agent.wakes}
    assert "exit code 3" in by_end[f"x:{first}"].body
    assert "exit code 4" in by_end[f"x:{second}"].body


async def test_a_reused_name_keeps_the_previous_runs_end_owed_across_a_sigkill(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    gate, ready = make_gate(daemon.root), make_gate(daemon.root, "ready")
    agent.refuse = True
    async with agent.serving():
        async with daemon.running(stop=False) as killed:
            first = await _first_run_ended_unacknowledged(daemon, agent)
            async with running_inline(daemon, 3, cmd=signalled(ready, gate, 4), name="x", wait_seconds=20):
                with trio.fail_after(20):
                    pid = await read_pid(ready)
                await sigkill(killed)
        agent.refuse = False
        async with daemon.running(), daemon.session() as session:
            with trio.fail_after(30):
                while f"x:{first}" not in {w.end_id for w in agent.wakes}:
                    await agent.wait_for(len(agent.wakes) + 1)
            with trio.fail_after(20):
                await release(gate)
            await wait_exited(pid)
            status = structured(await call(session, "status", id="x", wait_seconds=20))
    assert (status["state"], status["exit_code"]) == ("done", 4)
    (first_wake,) = [w for w in agent.wakes if w.end_id == f"x:{first}"]
    assert "done, exit code 3" in first_wake.body


async def test_a_refusal_at_the_open_files_limit_blames_what_holds_the_files(
    daemon: ForkedDaemonHandle,
) -> None:
    # 100 idle clients and no task: the files are the connections', and the refusal says so.
    async with (
        contextlib.AsyncExitStack() as idle,
        daemon.running(agent=False, nofile=(256, 256)),
        daemon.session() as session,
    ):
        for _ in range(100):
            stream, _reader = await open_raw_session(daemon.socket)  # answered: accepted
            await idle.enter_async_context(stream)
        result = await call(session, "run", cmd="true", wait_seconds=0)
        assert result.is_error, text_of(result)
        refusal = text_of(result)
        assert structured(result)["error"] == "TaskLimit"
        assert "0 held by running tasks" in refusal
        assert "client connections" in refusal
        assert "Close MCP clients that are idle" in refusal
        assert structured(await call(session, "list", limit=0))["total"] == 0
