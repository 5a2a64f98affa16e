"""The output cap, and a disk that fills up: the task says so, the daemon goes on (in-process, but
for a disk that really fills up)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from hive.agent_socket import Wake, open_agent_connection
from hive.bash import DiskError, TaskRecord, TaskStore
from tests.helpers.daemon import DaemonHandle, group_alive
from tests.helpers.gates import make_gate, open_gate, release_gate
from tests.helpers.harness import GUARD, acp_env, running_agent
from tests.helpers.inotify import wait_until
from tests.helpers.listener import AgentListener
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of
from tests.helpers.small_disk import can_mount_tmpfs, small_disk
from tests.helpers.tools import serving_tools


async def test_a_task_past_the_output_cap_is_stopped_and_says_why(short_tmp: Path) -> None:
    settings = {"max_output_bytes": 64 * 1024, "output_check_interval": 0.05, "kill_grace": 2.0}
    async with serving_tools(short_tmp, **settings) as tools:
        result = await tools.call("run", {"cmd": "yes hive", "wait_seconds": 30, "full": True})
        status = result.structured
        assert status["state"] == "stopped"
        assert status["stop_reason"] == "output_cap"
        # A check saw it past the cap and sent SIGINT, or saw it already past the cap and its
        # margin and sent SIGKILL, or the file size limit (a little past the cap) ended the
        # writer before a check came.
        assert status["signals"][:1] in ([], ["SIGINT"], ["SIGKILL"])
        assert any("over the cap of 65536 bytes" in note for note in status["notes"])
        assert "at the output cap" in result.text
        assert not group_alive(status["pid"])
        # Later tasks are unaffected.
        assert (await tools.call("run", {"cmd": "echo small"})).structured["state"] == "done"


class FlakyStore(TaskStore):
    """A store whose disk is full whenever ``full`` is set."""

    full: bool = False

    def _check(self) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def has_space(self) -> bool:
        return not self.full

    def save_record(self, record: TaskRecord, *, durable: bool = True) -> None:
        self._check()
        super().save_record(record, durable=durable)

    def save_loose_end(self, loose_end: object, *, earlier: bool = False, durable: bool = True) -> None:  # type: ignore[override]
        self._check()
        super().save_loose_end(loose_end, earlier=earlier, durable=durable)  # type: ignore[arg-type]


async def test_a_full_disk_is_reported_by_the_tasks_it_affects_and_does_not_stop_the_daemon(
    short_tmp: Path,
) -> None:
    store = FlakyStore(short_tmp / "state")
    # A 1 s kill grace: with the default 10 s, each of these tests waited it out on the way out.
    async with serving_tools(short_tmp, store=store, kill_grace=1.0) as tools:
        started = await tools.call("run", {"cmd": "sleep 60", "name": "writer", "wait_seconds": 0})
        assert not started.is_error, started.text
        store.full = True
        refused = await tools.call("run", {"cmd": "true"})
        assert refused.is_error
        assert "No space left on device" in refused.text
        assert "free space" in refused.text
        stopped = await tools.call("stop", {"id": "writer", "full": True})
        assert stopped.structured["state"] == "stopped"
        assert any("the disk is full" in note for note in stopped.structured["notes"])
        store.full = False
        ok = await tools.call("run", {"cmd": "echo recovered"})
        assert ok.structured["stdout"]["tail"] == "recovered\n"


async def test_starting_a_task_on_a_full_disk_raises_disk_error(short_tmp: Path) -> None:
    store = FlakyStore(short_tmp / "state")
    store.full = True
    async with serving_tools(short_tmp, store=store) as tools:
        with pytest.raises(DiskError, match="No space left on device"):
            await tools.manager.start("true")
        assert tools.manager.tasks == {}


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs unshare and a mountable tmpfs (user namespaces)")
async def test_a_really_full_disk(daemon: DaemonHandle) -> None:
    """The state directory on a 1 MiB tmpfs, in the daemon's own mount namespace: a task fills it."""
    daemon.state_dir.mkdir()
    script = 'mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"'
    runner = ["unshare", "-rm", "sh", "-c", script, "sh", str(daemon.state_dir)]
    async with (
        daemon.running("--output-check-secs", "0.05", agent=False, wrapper=runner),
        daemon.session() as session,
    ):
        cmd = "head -c 2000000 /dev/zero; echo head: $? >&2; exit 7"
        result = await call(session, "run", cmd=cmd, wait_seconds=30)
        status = structured(result)
        assert status["state"] == "done"
        assert status["stdout"]["bytes"] <= 1024 * 1024  # 2 MB were written; the rest did not fit
        # The room for the exit status was taken as the task started: the status is there.
        assert status["exit_code"] == 7
        notes = " / ".join(status["notes"])
        assert "filled up" in notes
        assert "exit status" not in notes
        # The daemon is still serving.
        assert not (await call(session, "list")).is_error


async def test_a_record_saved_once_the_disk_has_room_again_no_longer_says_it_could_not_be_saved(
    short_tmp: Path,
) -> None:
    store = FlakyStore(short_tmp / "state")
    # A 1 s kill grace: with the default 10 s, each of these tests waited it out on the way out.
    async with serving_tools(short_tmp, store=store, kill_grace=1.0) as tools:
        manager = tools.manager
        started = await tools.call("run", {"cmd": "sleep 60", "name": "w", "wait_seconds": 0})
        assert not started.is_error, started.text
        await trio.testing.wait_all_tasks_blocked()  # its supervisor is watching it
        store.full = True
        assert (await tools.call("stop", {"id": "w"})).structured["state"] == "stopped"
        task = manager.get("w")
        await task.recorded.wait()
        assert any("its record could not be saved" in note for note in task.record.notes)
        store.full = False
        await manager.ledger.save(task)
        assert not any("could not be saved" in note for note in task.record.notes), task.record.notes
        on_disk = json.loads(store.record_path("w").read_bytes())
        assert on_disk["state"] == "stopped"
        assert not any("could not be saved" in note for note in on_disk["notes"]), on_disk["notes"]


async def test_a_writer_faster_than_the_check_is_held_within_8_mib_of_the_cap(short_tmp: Path) -> None:
    """No timed check comes in time (one every 30 s): the output is checked as it grows, and the
    task is recorded stopped at the output cap."""
    cap = 1024**2
    async with serving_tools(short_tmp, max_output_bytes=cap, output_check_interval=30.0) as tools:
        store = tools.manager.store
        result = await tools.call(
            "run", {"cmd": "head -c 67108864 /dev/zero", "name": "w", "wait_seconds": 30, "full": True}
        )
        status = result.structured
        size = store.out_path("w").stat().st_size
        assert cap < size <= cap + 8 * 1024**2, size
        assert status["state"] == "stopped"
        assert status["stop_reason"] == "output_cap"
        assert "at the output cap" in result.text
        assert any("over the cap of 1048576 bytes" in note for note in status["notes"]), status["notes"]
        await tools.manager.get("w").recorded.wait()  # the answer can come before the record is written
        on_disk = json.loads(store.record_path("w").read_bytes())
        assert (on_disk["state"], on_disk["stop_reason"]) == ("stopped", "output_cap")


def _printed(wakes: list[Wake], task_id: str) -> dict[str, list[str]]:
    """The lines each match wake of ``task_id`` shows, by its id (a wake sent again under its
    id is one wake)."""
    by_id: dict[str, list[str]] = {}
    for wake in wakes:
        if wake.end_id is not None and wake.end_id.startswith(f"{task_id}:") and ":m" in wake.end_id:
            lines = wake.body.splitlines()[1:]
            assert by_id.setdefault(wake.end_id, lines) == lines, f"{wake.end_id} came with two bodies"
    return by_id


def _watch_unsaved(stderr: str) -> bool:
    """Whether the daemon's log says that a watch's state found no room (or that the disk ended
    it, as it did before: ``hive-bash-daemon: No space left on device``, exit 1)."""
    return any("No space left" in line and "the record of" not in line for line in stderr.splitlines())


async def _until_printed(agent: AgentListener, task_id: str, line: str) -> None:
    while not any(f"[stdout] {line}" in lines for lines in _printed(agent.wakes, task_id).values()):
        await agent.wait_for(len(agent.wakes) + 1)


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs unshare, nsenter and a mountable tmpfs")
async def test_a_full_disk_holds_a_match_wake_until_it_can_be_saved_and_never_ends_the_daemon(
    daemon: DaemonHandle, agent: AgentListener
) -> None:
    """The state directory on a 1 MiB tmpfs that the test fills while a watched task runs: the
    match its state has no room for is neither sent unsaved nor lost, and the daemon serves on."""
    gates = [make_gate(daemon.root, f"g{i}") for i in range(2)]
    cmd = f"echo hit 1; read x < {gates[0]}; echo hit 2; read x < {gates[1]}; echo hit 3"
    with trio.fail_after(90), small_disk(daemon.state_dir) as disk:
        async with (
            agent.serving(),
            daemon.running("--output-check-secs", "0.05", wrapper=disk.wrapper),
            daemon.session() as session,
        ):
            await call(session, "run", cmd=cmd, name="w", wait_seconds=0, notify_on="^hit")
            await _until_printed(agent, "w", "hit 1")
            tasks = disk.outside(daemon.state_dir / "bash-tasks")

            def acknowledged() -> bool:
                return any(not json.loads(watch.read_bytes())["owed"] for watch in tasks.glob("w@*.watch"))

            # Its acknowledgement saved before the disk fills (owed no more).
            await wait_until(acknowledged, tasks)
            disk.fill()
            # "hit 2" goes in the page that "hit 1" took; the state of its wake has no room.
            await release_gate(gates[0])
            await wait_until(lambda: _watch_unsaved(daemon.stderr_text()), daemon.root)
            assert "hit 2" not in str(_printed(agent.wakes, "w"))  # not sent before it is saved
            refused = await call(session, "run", cmd="true")
            assert refused.is_error
            assert "is full: free space there, and run it again" in text_of(refused)
            assert structured(await call(session, "status", id="w"))["state"] == "running"
            disk.free()
            await _until_printed(agent, "w", "hit 2")
            await release_gate(gates[1])
            done = structured(await call(session, "status", id="w", wait_seconds=30))
            assert done["state"] == "done"
            await _until_printed(agent, "w", "hit 3")
    shown = [line for lines in _printed(agent.wakes, "w").values() for line in lines]
    assert shown == ["[stdout] hit 1", "[stdout] hit 2", "[stdout] hit 3"]


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs unshare, nsenter and a mountable tmpfs")
async def test_hive_agent_with_bash_daemon_starts_on_a_full_disk_and_loses_no_match(short_tmp: Path) -> None:
    """A watched task's match comes while no daemon runs, and the disk is full when hive-agent
    starts its daemon: the daemon finds the match and cannot save it. Both stay up, and the
    match reaches the agent once space returns."""
    state = short_tmp / "state"
    # Its socket off the small disk, where the test reaches it; the agent's is the harness's.
    daemon = DaemonHandle(short_tmp, state, short_tmp / "bash.sock", state / "agent.sock")
    gate = make_gate(short_tmp)
    with trio.fail_after(GUARD), small_disk(state) as disk:
        tasks = disk.outside(state / "bash-tasks")
        # Nobody serves the agent socket yet: the first match wake stays owed, on disk.
        async with daemon.running(wrapper=disk.wrapper), daemon.session() as session:
            cmd = f"echo hit 1; read x < {gate}; echo hit 2"
            started = await call(session, "run", cmd=cmd, name="w", wait_seconds=0, notify_on="^hit")
            assert not started.is_error, text_of(started)
            await wait_until(lambda: list(tasks.glob("w@*.watch")), tasks)
        await release_gate(gate)
        exit_file = tasks / "w.exit"
        await wait_until(lambda: exit_file.read_bytes().strip(), tasks)
        disk.fill()
        env = acp_env(short_tmp, ["default", "default"])
        async with running_agent(short_tmp, env, "--with-bash-daemon", wrapper=disk.wrapper) as agent:
            await wait_until(lambda: _watch_unsaved(agent.stderr()), short_tmp)
            async with open_agent_connection(disk.outside(agent.socket)) as connection:
                held = await connection.status()
            disk.free()
            # Both wakes acknowledged and the output scanned to its end: the watch file goes.
            await wait_until(lambda: not list(tasks.glob("w@*.watch")), tasks)
            async with open_agent_connection(disk.outside(agent.socket)) as connection:
                after = await connection.status()
    assert held.bash_daemon is not None and held.bash_daemon.state == "running"
    assert after.bash_daemon is not None and after.bash_daemon.restarts == 0, agent.stderr()


MIB = 1024**2


def _output_size(store: TaskStore, task_id: str) -> int:
    return store.out_path(task_id).stat().st_size + store.err_path(task_id).stat().st_size


async def test_writers_on_both_streams_are_held_within_8_mib_of_the_cap(short_tmp: Path) -> None:
    """Four writers, two on each stream, that ignore SIGINT, with no timed check (one every 30 s)
    and a grace of 30 s: the cap counts both streams, so their output together ends within 8 MiB
    of it (the file size limit alone let each file reach the cap and 4 MiB more). They write about
    5 MiB/s together: how far past the cap writers faster than the daemon's reaction get is a
    matter of load (README, Limits), not what this proves."""
    cap = 8 * MIB
    settings = {"max_output_bytes": cap, "output_check_interval": 30.0, "kill_grace": 30.0}
    async with serving_tools(short_tmp, **settings) as tools:
        chunks = "while :; do printf '%*s\\n' 65536 ''; sleep 0.05; done"
        cmd = f"trap '' INT; ({chunks}) & ({chunks}) >&2 & ({chunks}) & ({chunks}) >&2; wait"
        with trio.fail_after(60):
            result = await tools.call("run", {"cmd": cmd, "name": "w", "wait_seconds": 50, "full": True})
        status = result.structured
        size = _output_size(tools.manager.store, "w")
        assert cap < size <= cap + 8 * MIB, size
        assert (status["state"], status["stop_reason"]) == ("stopped", "output_cap"), status
        assert "at the output cap" in result.text
        assert not group_alive(status["pid"])


async def test_a_task_whose_shell_died_of_sigxfsz_while_the_daemon_was_down_says_output_cap(
    daemon: DaemonHandle,
) -> None:
    """Past the cap while no daemon runs, only the file size limit holds the task: a writer meets
    it, and so does the wrapper shell as it reports that on stderr (SIGXFSZ, no exit code written).
    The next daemon says the task was stopped at the output cap, not that it vanished."""
    gate = make_gate(daemon.root)
    cmd = f"read -r line < {gate}; yes aaaaaaa & yes bbbbbbb >&2; wait"
    async with daemon.running("--max-output-bytes", "1MiB", agent=False), daemon.session() as session:
        started = structured(await call(session, "run", cmd=cmd, name="w", wait_seconds=0))
        assert started["state"] == "running"
        pid = structured(await call(session, "status", id="w"))["pid"]
    open_gate(gate)
    with trio.fail_after(30):
        await wait_exited(pid)
    assert not daemon.task_file("w", ".exit").read_text().strip().isdigit()  # no exit code written
    async with daemon.running("--max-output-bytes", "1MiB", agent=False), daemon.session() as session:
        result = await call(session, "status", id="w")
    status = structured(result)
    assert (status["state"], status["stop_reason"], status["exit_code"]) == ("stopped", "output_cap", None)
    assert "at the output cap" in text_of(result)
    notes = " / ".join(status["notes"])
    assert "over the cap of 1048576 bytes" in notes
    on_disk = json.loads(daemon.task_file("w", ".json").read_text())
    assert (on_disk["state"], on_disk["stop_reason"]) == ("stopped", "output_cap")


class CountingStore(TaskStore):
    """A store that counts the looks at a task's output size."""

    looks: int = 0

    def output_size(self, task_id: str) -> int:
        self.looks += 1
        return super().output_size(task_id)


async def test_a_task_far_from_the_cap_is_not_looked_at_for_every_write(short_tmp: Path) -> None:
    """Its output is checked as it grows, but no sooner than its writers could reach the cap: 600
    lines written one by one over a few hundred milliseconds, far below the default cap, cost a
    handful of looks, not one each (244 without that spacing)."""
    store = CountingStore(short_tmp / "state")
    async with serving_tools(short_tmp, store=store, output_check_interval=30.0) as tools:
        cmd = "for i in $(seq 300); do echo line $i; echo err $i >&2; /bin/true; done"
        result = await tools.call("run", {"cmd": cmd, "wait_seconds": 30})
        assert result.structured["state"] == "done", result.text
    assert store.looks < 30, store.looks
