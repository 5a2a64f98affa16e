"""What can escape a task is stopped all the same: a process that moves itself out of the task's
cgroup (into the daemon's, or into a sibling it makes), and, without cgroups, a process in a
session of its own with a cleared environment whose parent has exited (issue 39, defects 5, 6)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from hive.bash.procs._namespaces import cgroup_namespace
from hive.bash.procs._procs import ProcInfo, TaskMarks, members
from tests.helpers.daemon import DaemonHandle, task_cgroup_parent
from tests.helpers.forked_daemon import forked_shared_daemon
from tests.helpers.inotify import wait_until
from tests.helpers.results import call, structured
from tests.test_stopping import ended_after, make_fifo, needs_cgroups, pinned, wait_ready


@pytest.fixture(scope="module")
def with_cgroups() -> Iterator[DaemonHandle]:
    with forked_shared_daemon("--kill-grace", "0.3") as handle:
        yield handle


@pytest.fixture(scope="module")
def without_cgroups() -> Iterator[DaemonHandle]:
    with forked_shared_daemon("--kill-grace", "0.3", "--no-cgroups") as handle:
        yield handle


def hidden(root: Path, *, first: str = "") -> str:
    """A task whose process leaves every mark it can: a session of its own, a cleared
    environment, orphaned at once (a double fork), deaf to SIGINT; before its ``sleep`` it runs
    ``first`` (``$$`` is its pid). It says ready on the FIFO, then the task sleeps."""
    inner = f"trap '' INT; {first} echo $$ > escaped.pid; exec sleep 1000"
    return (
        f"cd {shlex.quote(str(root))}; (setsid env -i bash -c {shlex.quote(inner)} &) & "
        "until [ -s escaped.pid ]; do sleep 0.01; done; echo ready > ready; sleep 1000"
    )


@needs_cgroups
@pytest.mark.parametrize("how", ["stop", "timeout"])
@pytest.mark.parametrize("into", ["the daemon's cgroup", "a sibling it makes"])
async def test_a_process_that_leaves_its_tasks_cgroup_is_stopped_with_it(
    with_cgroups: DaemonHandle, short_tmp: Path, how: str, into: str
) -> None:
    parent = task_cgroup_parent(with_cgroups.state_dir)
    assert parent is not None
    if into == "a sibling it makes":
        sibling = parent / f"escape-{short_tmp.name}"
        move = f"mkdir {shlex.quote(str(sibling))}; echo $$ > {shlex.quote(str(sibling / 'cgroup.procs'))};"
    else:
        sibling = None
        move = f"echo $$ > {shlex.quote(str(parent.parent / 'cgroup.procs'))};"
    try:
        ended = await ended_after(with_cgroups, short_tmp, hidden(short_tmp, first=move), how)
    finally:
        if sibling is not None and sibling.is_dir():
            sibling.rmdir()
    assert ended["held_by"] == "cgroup"
    assert any("left its cgroup" in note for note in ended["notes"]), ended["notes"]


@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_without_cgroups_a_cleared_environment_in_a_double_fork_is_stopped(
    without_cgroups: DaemonHandle, short_tmp: Path, how: str
) -> None:
    ended = await ended_after(without_cgroups, short_tmp, hidden(short_tmp), how)
    assert ended["held_by"] == "subreaper"
    assert ended["signals"] == ["SIGINT", "SIGKILL"]


ESCAPED = "may have escaped"


def out_of_every_mark(daemon: DaemonHandle, root: Path) -> str:
    """A task run as root whose process leaves every mark of it: it ``nsenter``s the daemon's
    cgroup namespace (this process's), clears its environment, leaves its session and parent (a
    double fork) and moves into the daemon's cgroup, deaf to SIGINT. It says ready on the FIFO,
    then the task sleeps."""
    parent = task_cgroup_parent(daemon.state_dir)
    assert parent is not None
    procs = shlex.quote(str(parent.parent / "cgroup.procs"))
    inner = f"echo $$ > {procs}; trap '' INT; echo $$ > escaped.pid; exec sleep 1000"
    out = f"exec nsenter --cgroup=/proc/{os.getpid()}/ns/cgroup -- bash -c {shlex.quote(inner)}"
    return (
        f"cd {shlex.quote(str(root))}; (setsid env -i bash -c {shlex.quote(out)} &) & "
        "until [ -s escaped.pid ]; do sleep 0.01; done; echo ready > ready; sleep 1000"
    )


@needs_cgroups
async def test_a_process_that_leaves_its_tasks_namespace_too_is_said_to_have_escaped_and_a_clean_task_is_not(
    with_cgroups: DaemonHandle, short_tmp: Path
) -> None:
    fifo = make_fifo(short_tmp)
    async with with_cgroups.session() as session:
        await call(session, "run", cmd=out_of_every_mark(with_cgroups, short_tmp), name="n", wait_seconds=0)
        await wait_ready(fifo)
        with pinned(short_tmp, ("escaped",)) as fds:
            stopped = structured(await call(session, "stop", id="n"))
            status = structured(await call(session, "status", id="n"))
            signal.pidfd_send_signal(fds["escaped"], 0)  # not stopped: `pinned` kills it
        await call(session, "run", cmd="sleep 1000", name="c", wait_seconds=0)
        clean = structured(await call(session, "stop", id="c"))
    escaped = int((short_tmp / "escaped.pid").read_text())
    for seen in (stopped, status):
        assert seen["state"] == "stopped", seen
        (note,) = [n for n in seen["notes"] if ESCAPED in n]
        assert f"pids {escaped})" in note and "were not stopped" in note, note
        assert ESCAPED in seen["message"]
    assert clean["state"] == "stopped"
    assert not any(ESCAPED in note for note in clean["notes"]), clean["notes"]


@needs_cgroups
async def test_the_end_of_a_timed_out_task_says_what_may_have_escaped_it(
    with_cgroups: DaemonHandle, short_tmp: Path
) -> None:
    fifo = make_fifo(short_tmp)
    async with with_cgroups.session() as session:
        cmd = out_of_every_mark(with_cgroups, short_tmp)
        await call(session, "run", cmd=cmd, name="w", wait_seconds=0, timeout_secs=1)
        await wait_ready(fifo)
        with pinned(short_tmp, ("escaped",)):
            # Nobody waits for its end: it is owed to the agent, as a wake kept in its loose end.
            loose_end = with_cgroups.loose_end("w")

            def owed_wake() -> str | None:
                try:
                    wake = json.loads(loose_end.read_bytes()).get("wake")
                except (OSError, ValueError):
                    return None
                return None if wake is None else str(wake["body"])

            with trio.fail_after(30):
                body = await wait_until(owed_wake, loose_end.parent)
    assert body.startswith("bash task w ended: timed out"), body
    assert ESCAPED in body, body


@contextlib.contextmanager
def no_new_cgroups(parent: Path) -> Iterator[None]:
    """No cgroup can be made below ``parent`` (``cgroup.max.descendants`` 0: mkdir fails, as it
    does when the daemon is out of open files) while the block runs."""
    limit = parent / "cgroup.max.descendants"
    limit.write_text("0")
    try:
        yield
    finally:
        limit.write_text("max")


@needs_cgroups
@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_a_task_whose_cgroup_could_not_be_made_holds_a_cleared_environment_in_a_double_fork(
    with_cgroups: DaemonHandle, short_tmp: Path, how: str
) -> None:
    parent = task_cgroup_parent(with_cgroups.state_dir)
    assert parent is not None
    with no_new_cgroups(parent):
        ended = await ended_after(with_cgroups, short_tmp, hidden(short_tmp), how)
    assert ended["held_by"] == "subreaper"
    assert ended["signals"] == ["SIGINT", "SIGKILL"]
    assert "cannot make a cgroup for task e" in with_cgroups.stderr_text()


def _proc(
    pid: int, *, ppid: int = 1, pgid: int | None = None, tag: str | None = None, ns: int | None = None
) -> ProcInfo:
    return ProcInfo(
        pid=pid,
        ppid=ppid,
        pgid=pid if pgid is None else pgid,
        zombie=False,
        start_time=pid,
        tag=tag,
        cgroup_ns=ns,
    )


def test_a_tasks_marks_find_it_by_tag_group_namespace_and_parent_and_nothing_else() -> None:
    own_ns = cgroup_namespace(os.getpid())
    procs = [
        _proc(100, tag="t:1"),  # the wrapper, leading its group
        _proc(101, ppid=100, pgid=100, tag="t:1"),
        _proc(200, tag="t:1"),  # left the group (setsid), kept the tag
        _proc(300, ns=7),  # cleared its environment, orphaned: only its namespace tells
        _proc(301, ppid=300, ns=7),
        _proc(400, ppid=200),  # below one that kept the tag
        _proc(500, tag="u:2", ns=8),  # another task's
        _proc(600, ns=own_ns),  # the daemon's namespace is no task's
    ]
    found = [p.pid for p in members(procs, TaskMarks("t:1", 100, 7))]
    assert found == [100, 101, 200, 300, 301, 400]
    # Without the namespace (none made, or not learned yet), the tag is the net.
    assert [p.pid for p in members(procs, TaskMarks("t:1", None, None))] == [100, 101, 200, 400]
    assert [p.pid for p in members(procs, TaskMarks("t:1", None, own_ns))] == [100, 101, 200, 400]


def test_a_process_that_ends_while_the_stop_looks_is_not_counted_as_having_left(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The group's SIGINT comes before the look: what it ended is gone from the cgroup by the
    # time its members are read, and was counted as having left it (CI: "4 of its processes
    # had left its cgroup" for one escapee).
    import subprocess

    from hive import _proc
    from hive.bash.procs import _cgroups, _procs, _stopping

    alive = subprocess.Popen(["sleep", "60"])
    ended = subprocess.Popen(["true"])
    ended.wait()
    zombie = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        stats = {p.pid: _proc.read_stat(p.pid) for p in (alive, zombie)}
        found = [ProcInfo.of(pid, stat, "t:1") for pid, stat in stats.items() if stat is not None]
        found.append(
            ProcInfo(pid=ended.pid, ppid=os.getpid(), pgid=ended.pid, zombie=False, start_time=1, tag="t:1")
        )
        monkeypatch.setattr(_procs, "task_processes", lambda marks: found)
        monkeypatch.setattr(_cgroups, "members", lambda cgroup: [])
        left = _stopping._left_cgroup(tmp_path, TaskMarks(pgid=0, tag="t:1"))
        assert [p.pid for p in left] == [alive.pid]
    finally:
        alive.send_signal(signal.SIGINT)
        alive.wait()
        zombie.wait()
