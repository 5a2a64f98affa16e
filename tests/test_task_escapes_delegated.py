"""What can escape a task of an unprivileged daemon in a cgroup delegated to it (the NixOS shape:
a service with ``User=`` and ``Delegate=yes``), issue 39, defects 5 and 6. Such a daemon makes its
tasks' cgroups below its own but no cgroup namespace (``unshare --cgroup`` takes CAP_SYS_ADMIN),
and its tasks run as its user, who may write any ``cgroup.procs`` of the delegated subtree. A
process that moves itself out of its task's cgroup is found by its ``HIVE_BASH_TASK`` tag; one
that also cleared its environment, by its parentage: the task's wrapper is its subreaper while
the task runs. The same holds for the daemon run with ``--no-cgroups``."""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.bash.procs import _cgroups
from tests.helpers.daemon import DaemonHandle, remove_cgroup_tree
from tests.helpers.forked_daemon import DaemonUser, forked_shared_daemon
from tests.helpers.results import call, structured
from tests.test_stopping import all_exit, ended_after, make_fifo, pinned, wait_ready
from tests.test_task_escapes import hidden

NOBODY = 65534
ESCAPED = "may have escaped"


def _why_not_delegated() -> str | None:
    """Why a cgroup cannot be delegated to another user here; None if it can."""
    if os.geteuid() != 0:
        return "needs root, to delegate a cgroup to an unprivileged user"
    own = _cgroups.own_cgroup_dir()
    if own is None:
        return "needs a cgroup v2 hierarchy"
    probe = own / f"hive-test-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"needs a writable cgroup v2 hierarchy ({exc})"
    probe.rmdir()
    return None


pytestmark = pytest.mark.skipif(_why_not_delegated() is not None, reason=str(_why_not_delegated()))


@pytest.fixture(scope="module")
def delegated() -> Iterator[Path]:
    """A cgroup delegated to ``nobody`` as systemd's ``Delegate=yes`` does: the directory and the
    files that moving processes and making children take are that user's."""
    own = _cgroups.own_cgroup_dir()
    assert own is not None
    cgroup = own / f"hive-test-delegated-{os.getpid()}"
    cgroup.mkdir()
    try:
        for path in (
            cgroup,
            *(cgroup / name for name in ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control")),
        ):
            os.chown(path, NOBODY, NOBODY)
        yield cgroup
    finally:
        remove_cgroup_tree(cgroup)


@pytest.fixture(scope="module")
def unprivileged(delegated: Path) -> Iterator[DaemonHandle]:
    with forked_shared_daemon("--kill-grace", "0.3", user=DaemonUser(NOBODY, NOBODY, delegated)) as handle:
        yield handle


@pytest.fixture(scope="module")
def unprivileged_without_cgroups(delegated: Path) -> Iterator[DaemonHandle]:
    with forked_shared_daemon(
        "--kill-grace", "0.3", "--no-cgroups", user=DaemonUser(NOBODY, NOBODY, delegated)
    ) as handle:
        yield handle


@pytest.fixture
def nobodys_tmp(short_tmp: Path) -> Path:
    """The test's directory, where the tasks (run as ``nobody``) write."""
    os.chown(short_tmp, NOBODY, NOBODY)
    return short_tmp


def _escaping(root: Path, move_to: Path, *, clear_env: bool) -> str:
    """A task whose process moves itself into ``move_to`` and leaves its session and its parent
    (a double fork), deaf to SIGINT; with ``clear_env``, it also clears its environment, the tag
    with it. It says ready on the FIFO once it has moved, then the task sleeps."""
    inner = (
        f"echo $$ > {shlex.quote(str(move_to / 'cgroup.procs'))} || exit; "
        "trap '' INT; echo $$ > escaped.pid; exec sleep 1000"
    )
    env = "env -i " if clear_env else ""
    return (
        f"cd {shlex.quote(str(root))}; (setsid {env}bash -c {shlex.quote(inner)} &) & "
        "until [ -s escaped.pid ]; do sleep 0.01; done; echo ready > ready; sleep 1000"
    )


def _fifo(root: Path) -> Path:
    fifo = make_fifo(root)
    os.chown(fifo, NOBODY, NOBODY)
    return fifo


def _task_parent(daemon: DaemonHandle, delegated: Path) -> Path:
    return delegated / _cgroups.task_parent_name(daemon.state_dir)


@contextlib.contextmanager
def _target(daemon: DaemonHandle, delegated: Path, root: Path, into: str) -> Iterator[Path]:
    """Where the escapee moves: the daemon's own cgroup, or a sibling of the task's cgroup that
    the task makes (made here as ``nobody`` would make it, and removed afterwards)."""
    if into == "the daemon's cgroup":
        yield delegated
        return
    sibling = _task_parent(daemon, delegated) / f"escape-{root.name}"
    sibling.mkdir()
    try:
        os.chown(sibling / "cgroup.procs", NOBODY, NOBODY)
        yield sibling
    finally:
        remove_cgroup_tree(sibling)


@pytest.mark.parametrize("how", ["stop", "timeout"])
@pytest.mark.parametrize("into", ["the daemon's cgroup", "a sibling it makes"])
async def test_a_process_that_leaves_its_cgroup_keeping_its_tag_is_stopped_with_the_task(
    unprivileged: DaemonHandle, delegated: Path, nobodys_tmp: Path, how: str, into: str
) -> None:
    root = nobodys_tmp
    with _target(unprivileged, delegated, root, into) as move_to:
        cmd = _escaping(root, move_to, clear_env=False)
        ended = await ended_after(unprivileged, root, cmd, how, name="t", ready=_fifo(root))
    assert ended["held_by"] == "cgroup"
    assert any("1 of its processes had left its cgroup" in note for note in ended["notes"]), ended["notes"]
    assert not any(ESCAPED in note for note in ended["notes"]), ended["notes"]


@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_a_cleared_environment_that_leaves_its_cgroup_is_stopped_with_the_task(
    unprivileged: DaemonHandle, delegated: Path, nobodys_tmp: Path, how: str
) -> None:
    """No tag, no namespace, not in the task's cgroup: the task's wrapper, its subreaper, held
    it as a descendant, and the stop found it there before the wrapper ended."""
    root = nobodys_tmp
    cmd = _escaping(root, delegated, clear_env=True)
    ended = await ended_after(unprivileged, root, cmd, how, name="u", ready=_fifo(root))
    async with unprivileged.session() as session:
        await call(session, "run", cmd="sleep 1000", name="c", wait_seconds=0)
        clean = structured(await call(session, "stop", id="c"))
    assert ended["signals"] == ["SIGINT", "SIGKILL"]
    assert any("1 of its processes had left its cgroup" in note for note in ended["notes"]), ended["notes"]
    for seen in (ended, clean):
        assert not any(ESCAPED in note for note in seen["notes"]), seen["notes"]


async def test_a_cleared_environment_still_in_its_tasks_cgroup_is_no_other_tasks_escapee(
    unprivileged: DaemonHandle, nobodys_tmp: Path
) -> None:
    root = nobodys_tmp
    fifo = _fifo(root)
    async with unprivileged.session() as session:
        await call(session, "run", cmd="sleep 1000", name="before", wait_seconds=0)
        await call(session, "run", cmd=hidden(root), name="stays", wait_seconds=0)
        await wait_ready(fifo)
        with pinned(root, ("escaped",)) as fds:
            before = structured(await call(session, "stop", id="before"))
            stays_ended = structured(await call(session, "stop", id="stays"))
            await all_exit(fds)
    for ended in (before, stays_ended):
        assert ended["state"] == "stopped", ended
        assert not any(ESCAPED in note for note in ended["notes"]), ended["notes"]


@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_without_cgroups_a_cleared_environment_in_a_double_fork_is_stopped(
    unprivileged_without_cgroups: DaemonHandle, nobodys_tmp: Path, how: str
) -> None:
    """Held by the subreaper alone: the wrapper's, while the task runs."""
    root = nobodys_tmp
    ended = await ended_after(
        unprivileged_without_cgroups, root, hidden(root), how, name="f", ready=_fifo(root)
    )
    assert ended["held_by"] == "subreaper"
    assert ended["signals"] == ["SIGINT", "SIGKILL"]
    assert not any(ESCAPED in note for note in ended["notes"]), ended["notes"]
