"""run / status / stop / list through the real relay, against a real daemon process (one for the
module's tests that send wakes, one for the others), and `list` in-process."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.helpers.daemon import DaemonHandle, group_alive, shared_daemon
from tests.helpers.inotify import wait_until
from tests.helpers.listener import AgentListener
from tests.helpers.results import call, structured, text_of
from tests.helpers.tools import serving_tools


@pytest.fixture(scope="module")
def served() -> Iterator[DaemonHandle]:
    """The daemon of this module's tests that send no wakes (a short grace, for the timeouts)."""
    with shared_daemon("--kill-grace", "1") as handle:
        yield handle


@pytest.fixture(scope="module")
def waking() -> Iterator[DaemonHandle]:
    """The daemon of this module's tests of wakes: each serves its agent socket while it runs."""
    with shared_daemon(agent=True) as handle:
        yield handle


@pytest.fixture
def agent(waking: DaemonHandle) -> AgentListener:
    return AgentListener(waking.agent_socket)


def done_record(daemon: DaemonHandle, task_id: str) -> dict[str, object] | None:
    """The task's record on disk if it says done (it is saved after the answer that carried it)."""
    path = daemon.task_file(task_id, ".json")
    record: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}
    return record if record.get("state") == "done" else None


async def test_task_ending_inside_the_wait_answers_inline_then_tells_the_harness_it_was_shown(
    waking: DaemonHandle, agent: AgentListener
) -> None:
    """Under a harness (an agent socket), an end answered inline is owed until the harness has
    it: its wake goes out marked shown (when), and its loose end goes only after the ack."""
    daemon = waking
    async with agent.serving(), daemon.session() as session:
        before = time.time()
        result = await call(session, "run", cmd="echo out; echo err >&2; exit 4", wait_seconds=30)
        assert not result.is_error, text_of(result)
        status = structured(result)
        assert status["state"] == "done"
        assert status["exit_code"] == 4
        assert status["stdout"]["tail"] == "out\n"
        assert status["stderr"]["tail"] == "err\n"
        assert "exit code 4" in text_of(result)
        task_id = status["id"]
        with trio.fail_after(20):
            await agent.wait_for(1)
            await wait_until(lambda: not daemon.loose_end(task_id).exists(), daemon.loose_end(task_id).parent)
        [wake] = agent.wakes
        assert wake.sender == f"bash-task-{task_id}"
        assert wake.end_id is not None and wake.end_id.startswith(f"{task_id}:")
        assert wake.shown_at is not None and before <= wake.shown_at <= time.time()
        assert "exit code 4" in wake.body
    with trio.fail_after(20):
        record = await wait_until(lambda: done_record(daemon, task_id), daemon.state_dir / "bash-tasks")
    assert record["state"] == "done"
    assert record["exit_code"] == 4


async def test_task_ending_later_wakes_once_and_its_loose_end_goes_after_the_ack(
    waking: DaemonHandle, agent: AgentListener, short_tmp: Path
) -> None:
    daemon = waking
    gate = short_tmp / "gate"
    os.mkfifo(gate)  # the task ends when the test says so, not after a guess of a delay
    async with agent.serving(), daemon.session() as session:
        result = await call(session, "run", cmd=f"read line < {gate}; seq 1 50", wait_seconds=0)
        text = text_of(result)
        task_id = structured(result)["id"]
        assert text.startswith(f"task started: id={task_id}")
        assert daemon.loose_end(task_id).exists()
        await trio.to_thread.run_sync(gate.write_text, "go\n", abandon_on_cancel=True)
        with trio.fail_after(20):
            (wake,) = await agent.wait_for(1)
        assert wake.sender == f"bash-task-{task_id}"
        assert "exit code 0" in wake.body
        assert wake.body.rstrip().splitlines()[-2] == "50"
        assert "\n31\n" in wake.body and "\n30\n" not in wake.body  # the last 20 lines
        assert wake.transient
        status = structured(await call(session, "status", id=task_id))
        assert status["state"] == "done"
        assert status["stdout"]["bytes"] == len("".join(f"{i}\n" for i in range(1, 51)))
        loose_end = daemon.loose_end(task_id)
        with trio.fail_after(20):
            await wait_until(lambda: not loose_end.exists(), loose_end.parent)
    assert len(agent.wakes) == 1


async def test_status_waits_for_the_end(served: DaemonHandle, short_tmp: Path) -> None:
    gate = short_tmp / "gate"
    os.mkfifo(gate)  # the task ends when the test says so, not after a guess of a delay
    async with served.session() as session:
        started = structured(await call(session, "run", cmd=f"read line < {gate}; echo late", wait_seconds=0))
        assert started["state"] == "running"
        now = structured(await call(session, "status", id=started["id"]))
        assert now["state"] == "running"
        assert now["exit_code"] is None
        await trio.to_thread.run_sync(gate.write_text, "go\n")
        ended = structured(await call(session, "status", id=started["id"], wait_seconds=20))
        assert ended["state"] == "done"
        assert ended["stdout"]["tail"] == "late\n"


async def test_name_is_refused_while_running_and_reusable_once_finished(served: DaemonHandle) -> None:
    async with served.session() as session:
        first = await call(session, "run", cmd="sleep 30", name="build", wait_seconds=0)
        assert structured(first)["id"] == "build"
        busy = await call(session, "run", cmd="true", name="build")
        assert busy.is_error
        assert "still running" in text_of(busy)
        stopped = structured(await call(session, "stop", id="build"))
        assert stopped["state"] == "stopped"
        again = await call(session, "run", cmd="echo second", name="build", wait_seconds=30)
        assert not again.is_error, text_of(again)
        assert structured(again)["stdout"]["tail"] == "second\n"


async def test_timeout_kills_a_group_that_ignores_sigint_after_the_grace(served: DaemonHandle) -> None:
    async with served.session() as session:
        cmd = "trap '' INT; sleep 60 & sleep 60; wait"
        started = structured(await call(session, "run", cmd=cmd, timeout_secs=0.5, wait_seconds=0))
        ended = structured(await call(session, "status", id=started["id"], wait_seconds=20))
        assert ended["state"] == "timed_out"
        assert ended["signals"] == ["SIGINT", "SIGKILL"]
        record = json.loads(served.task_file(started["id"], ".json").read_text())
        assert not group_alive(record["pid"])


async def test_timeout_with_a_task_that_obeys_sigint(served: DaemonHandle) -> None:
    async with served.session() as session:
        result = structured(await call(session, "run", cmd="sleep 60", timeout_secs=0.3, wait_seconds=20))
        assert result["state"] == "timed_out"
        assert result["signals"] == ["SIGINT"]
        assert result["exit_code"] == 130


async def test_socket_is_private(served: DaemonHandle) -> None:
    mode = os.stat(served.socket).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600


async def test_a_task_that_ends_while_run_answers_is_woken_exactly_once(
    waking: DaemonHandle, agent: AgentListener
) -> None:
    daemon = waking
    # `true` with wait_seconds=0 ends while `run` is still writing its loose end: both the
    # end and the answer then owe the wake, and it must still be sent once.
    names = [f"quick{i}" for i in range(20)]
    async with agent.serving(), daemon.session() as session:
        for name in names:
            assert structured(await call(session, "run", cmd="true", name=name, wait_seconds=0))["id"] == name
        with trio.fail_after(30):
            await agent.wait_for(len(names))
        await call(session, "run", cmd="true", name="marker2", wait_seconds=0)
        with trio.fail_after(30):
            await agent.wait_for(len(names) + 1)
    assert sorted(agent.senders()) == sorted(f"bash-task-{n}" for n in [*names, "marker2"])


async def test_list_shows_the_newest_first_and_honours_its_limit(short_tmp: Path) -> None:
    async with serving_tools(short_tmp) as tools:
        for i in range(3):
            await tools.call("run", {"cmd": f"echo {i}", "name": f"n{i}"})
        everything = (await tools.call("list", {"limit": 0})).structured
        assert [t["id"] for t in everything["tasks"]] == ["n2", "n1", "n0"]
        assert everything["tasks"][0]["cmd"] == "echo 2"
        assert everything["total"] == 3
        newest = await tools.call("list", {"limit": 2})
        assert [t["id"] for t in newest.structured["tasks"]] == ["n2", "n1"]
        assert "1 older task not shown" in newest.text
