"""A task is created in its cgroup: the first program the daemon execs for it already reads its
task's cgroup in /proc/self/cgroup, with no write to cgroup.procs (issue 41). Where hive._clone3
was not built the daemon falls back to the wrapper's write, says so once, and the task's command
is still in its cgroup and under its file size limit."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest
import trio

from hive.bash.procs._cgroups import own_v2_path
from tests.helpers.daemon import DaemonHandle, task_cgroup_parent
from tests.helpers.results import call, structured
from tests.helpers.spawning import clone3_usable, unbuilt_clone3_path
from tests.test_stopping import needs_cgroups

FALLBACK_SAID = "hive._clone3 is not built"


def first_act_bash(root: Path) -> Path:
    """A directory whose ``bash`` (the one the daemon runs tasks with: the first on its PATH)
    records its own cgroup as its first act when it is a task's wrapper (its 6th argument the
    wrapper's mark), then is the real bash."""
    real = os.path.realpath("/bin/bash")
    bindir = root / "bin"
    bindir.mkdir()
    fake = bindir / "bash"
    log = root / "first-acts"
    fake.write_text(
        "#!/bin/sh\n"
        f"case $6 in hive-bash-task:*) grep '^0::' /proc/self/cgroup >> {shlex.quote(str(log))};; esac\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return bindir


async def run_tasks(daemon: DaemonHandle, count: int) -> None:
    """Run ``count`` tasks, each of which checks that its wrapper is in one of the state
    directory's task cgroups (as the hierarchy shows it: the task has a cgroup namespace)."""
    parent = task_cgroup_parent(daemon.state_dir)
    assert parent is not None
    check = f'cat {shlex.quote(str(parent))}/*/cgroup.procs | grep -qx "$$" && echo in-its-cgroup'
    async with daemon.session() as session:
        for n in range(count):
            done = structured(await call(session, "run", cmd=check, name=f"t{n}", wait_seconds=30))
            assert done["state"] == "done" and done["held_by"] == "cgroup", done
            assert daemon.task_file(f"t{n}", ".out").read_text() == "in-its-cgroup\n"


@needs_cgroups
@pytest.mark.skipif(not clone3_usable(), reason="hive._clone3 is not built here, or the kernel has no clone3")
async def test_the_first_program_of_a_task_is_already_in_its_cgroup(daemon: DaemonHandle) -> None:
    bindir = first_act_bash(daemon.root)
    with trio.fail_after(60):
        async with daemon.running(wrapper=["env", f"PATH={bindir}{os.pathsep}{os.environ['PATH']}"]):
            await run_tasks(daemon, 2)
    parent = task_cgroup_parent(daemon.state_dir)
    assert parent is not None
    first_acts = [own_v2_path(line) for line in (daemon.root / "first-acts").read_text().splitlines()]
    # Each wrapper's first act saw a cgroup of its own below the state directory's task parent.
    assert [path and path.rsplit("/", 2)[-2] for path in first_acts] == [parent.name] * 2, first_acts
    assert len(set(first_acts)) == 2
    assert FALLBACK_SAID not in daemon.stderr_text()


@needs_cgroups
async def test_without_the_extension_a_task_enters_its_cgroup_and_the_log_says_so_once(
    daemon: DaemonHandle,
) -> None:
    pythonpath = unbuilt_clone3_path(daemon.root)
    with trio.fail_after(60):
        async with daemon.running(wrapper=["env", f"PYTHONPATH={pythonpath}"]):
            await run_tasks(daemon, 2)
            async with daemon.session() as session:
                # RLIMIT_FSIZE still holds: `ulimit -f` (in 1024-byte blocks) is finite.
                limit = structured(await call(session, "run", cmd="ulimit -f", name="limit", wait_seconds=30))
                assert limit["state"] == "done", limit
    assert daemon.task_file("limit", ".out").read_text().strip().isdigit()
    assert daemon.stderr_text().count(FALLBACK_SAID) == 1, daemon.stderr_text()
