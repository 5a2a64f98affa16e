"""A stop, a timeout and the output cap end every process a task started, wherever it went;
the cap holds on a task's files for as long as anything writes them; the per-interval
checks do not block the daemon's event loop."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shlex
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession

from hive.agent_socket import WakeCourier
from hive.bash._task_manager import TaskManager, TaskSettings
from hive.bash._tools import BashTools
from hive.bash.files._store import TaskStore
from hive.bash.procs import _cgroups
from tests.helpers.daemon import DaemonHandle, task_cgroup_parent
from tests.helpers.forked_daemon import forked_daemon_under, forked_shared_daemon
from tests.helpers.results import call, structured, text_of
from tests.helpers.spawning import clone3_usable, without_clone3

CAP = 200 * 1024
"""The cap of the `capped` daemon."""
PROBES = ("setsid", "double_fork", "set_m", "setpgid", "deaf")


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonHandle]:
    """The paths of a daemon under ``short_tmp``, forked from the zygote when the test starts it
    (see ``tests.helpers.forked_daemon``): a restart costs a fork, not the SDK's import."""
    yield from forked_daemon_under(short_tmp)


def probe_tree(root: Path, *, then: str) -> str:
    """A task that starts one process each way a process can leave its task's process group,
    records their pids in ``root``, says it is ready on the ``ready`` FIFO, then runs ``then``."""
    setpgid = f"import os, time; os.setpgid(0, 0); open({str(root / 'setpgid.pid')!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    return "\n".join(
        [
            f"cd {shlex.quote(str(root))}",
            # Its own session.
            "setsid sleep 300 & echo $! > setsid.pid",
            # A double fork: the subshell exits, and sleep is orphaned.
            "(sleep 300 & echo $! > double_fork.pid)",
            # A job-control group of its own, then orphaned.
            "(set -m; sleep 300 & echo $! > set_m.pid)",
            # A new group, by the process itself.
            f"{shlex.quote(sys.executable)} -c {shlex.quote(setpgid)} &",
            # Its own session, and deaf to SIGINT: only SIGKILL ends it.
            "setsid sh -c 'trap \"\" INT; exec sleep 300' & echo $! > deaf.pid",
            "until [ -s setpgid.pid ]; do sleep 0.01; done",
            "echo ready > ready",
            then,
        ]
    )


async def wait_ready(fifo: Path) -> None:
    def read() -> bytes:
        with open(fifo, "rb") as f:
            return f.read()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(read, abandon_on_cancel=True) == b"ready\n"


@contextlib.contextmanager
def pinned(root: Path, names: tuple[str, ...] = PROBES) -> Iterator[dict[str, int]]:
    """A pidfd for each probe, opened while it runs: it pins that very process.

    A probe still alive at the end (the test failed) is SIGKILLed, so that a writer left over
    by a failed test does not go on filling the disk.
    """
    fds = {}
    try:
        for name in names:
            pid = int((root / f"{name}.pid").read_text())
            fds[name] = os.pidfd_open(pid)
        yield fds
    finally:
        for fd in fds.values():
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)


async def all_exit(fds: dict[str, int]) -> None:
    """Wait for every pinned process to exit; fails naming the ones still alive."""
    alive = set(fds)
    with trio.move_on_after(15):
        for name, fd in fds.items():
            await trio.lowlevel.wait_readable(fd)
            alive.discard(name)
    assert not alive, f"still alive: {sorted(alive)}"


async def ended_after(
    daemon: DaemonHandle,
    root: Path,
    cmd: str,
    how: str,
    *,
    name: str = "e",
    pin: str = "escaped",
    timeout_secs: float = 2,
    ready: Path | None = None,
) -> dict[str, Any]:
    """Run ``cmd`` as task ``name``, wait for it to say ready (on ``ready``, made here if not
    given), end it by ``how`` (a stop, or a timeout of ``timeout_secs``); its record at the end,
    once its process ``pin`` has exited (or a failure naming it)."""
    fifo = ready or make_fifo(root)
    async with daemon.session() as session:
        timeout = {"timeout_secs": timeout_secs} if how == "timeout" else {}
        await call(session, "run", cmd=cmd, name=name, wait_seconds=0, **timeout)
        await wait_ready(fifo)
        with pinned(root, (pin,)) as fds:
            if how == "stop":
                ended = structured(await call(session, "stop", id=name))
            else:
                ended = structured(await call(session, "status", id=name, wait_seconds=30))
            assert ended["state"] == ("stopped" if how == "stop" else "timed_out"), ended
            await all_exit(fds)
    return ended


@pytest.fixture(scope="module")
def quick_grace() -> Iterator[DaemonHandle]:
    """The daemon of the tests that stop a tree of processes: a short grace (the deaf probe waits
    it out for its SIGKILL), a small cap checked often."""
    with forked_shared_daemon(
        "--kill-grace", "0.3", "--max-output-bytes", "64K", "--output-check-secs", "0.05"
    ) as handle:
        yield handle


@pytest.fixture(scope="module")
def capped() -> Iterator[DaemonHandle]:
    """The daemon of the tests of escaped writers. Its grace is longer than the tests' guard: the
    writer ignores SIGINT (an `&` child of a non-interactive shell), so only a grace cut short for
    the cap ends it in time."""
    with forked_shared_daemon(
        "--kill-grace", "60", "--max-output-bytes", str(CAP), "--output-check-secs", "0.05"
    ) as handle:
        yield handle


@pytest.fixture(scope="module")
def short_grace() -> Iterator[DaemonHandle]:
    """The daemon of the tests of a cleared environment in a double fork."""
    with forked_shared_daemon("--kill-grace", "0.3") as handle:
        yield handle


def make_fifo(root: Path, name: str = "ready") -> Path:
    fifo = root / name
    os.mkfifo(fifo)
    return fifo


@contextlib.asynccontextmanager
async def pinned_task(
    session: ClientSession, root: Path, cmd: str, names: tuple[str, ...] = PROBES, **run: Any
) -> AsyncIterator[tuple[dict[str, Any], dict[str, int]]]:
    """Runs ``cmd`` (``run``: the call's other arguments) and waits for it to write the FIFO
    ``ready`` in ``root``; yields its status at the start and its processes ``names`` pinned."""
    fifo = make_fifo(root)
    started = structured(await call(session, "run", cmd=cmd, wait_seconds=0, **run))
    await wait_ready(fifo)
    with pinned(root, names) as fds:
        yield started, fds


async def test_stop_ends_every_process_of_the_task_wherever_it_went(
    quick_grace: DaemonHandle, short_tmp: Path
) -> None:
    async with quick_grace.session() as session:
        cmd = probe_tree(short_tmp, then="sleep 300")
        async with pinned_task(session, short_tmp, cmd, name="tree") as (started, fds):
            assert started["state"] == "running"
            stopped = structured(await call(session, "stop", id="tree"))
            assert stopped["state"] == "stopped"
            await all_exit(fds)
        notes = " / ".join(stopped["notes"])
        assert "outside its process group" in notes
        assert "SIGKILL went to" in notes  # the deaf one
        assert stopped["signals"] == ["SIGINT", "SIGKILL"]


async def test_timeout_ends_every_process_of_the_task_wherever_it_went(
    quick_grace: DaemonHandle, short_tmp: Path
) -> None:
    async with quick_grace.session() as session:
        cmd = probe_tree(short_tmp, then="sleep 300")
        # Long enough for the tree to be ready and pinned (~0.05 s idle): a timeout that came
        # first would end the task before it says ready, and `wait_ready` would fail.
        async with pinned_task(session, short_tmp, cmd, name="tree", timeout_secs=2) as (_, fds):
            ended = structured(await call(session, "status", id="tree", wait_seconds=30))
            assert ended["state"] == "timed_out"
            await all_exit(fds)
        assert "outside its process group" in " / ".join(ended["notes"])


async def test_output_cap_ends_every_process_of_the_task_wherever_it_went(
    quick_grace: DaemonHandle, short_tmp: Path
) -> None:
    async with quick_grace.session() as session:
        # The writer waits for the test to pin the probes, then fills stdout.
        go = make_fifo(short_tmp, "go")
        cmd = probe_tree(short_tmp, then=f"cat {shlex.quote(str(go))} >/dev/null; yes hive")
        async with pinned_task(session, short_tmp, cmd, name="tree") as (_, fds):
            await trio.to_thread.run_sync(go.write_bytes, b"go\n")
            ended = structured(await call(session, "status", id="tree", wait_seconds=30))
            assert ended["state"] == "stopped"
            assert ended["stop_reason"] == "output_cap"
            await all_exit(fds)


# Writes to the task's stdout from a session of its own, once the test says go.
WRITER = (
    "setsid sh -c 'read go < go; while :; do echo 0123456789abcdef0123456789abcdef0123456789abcdef; done' "
    "& echo $! > writer.pid"
)


@contextlib.asynccontextmanager
async def escaped_writer(
    session: ClientSession, root: Path, then: str
) -> AsyncIterator[tuple[Path, dict[str, int]]]:
    """Task ``w`` in ``root`` starts a WRITER, says ready and does ``then``; yields, with the
    writer pinned, the FIFO whose ``go`` lets it write."""
    go = make_fifo(root, "go")
    cmd = f"cd {shlex.quote(str(root))}; {WRITER}; echo ready > ready{then}"
    async with pinned_task(session, root, cmd, ("writer",), name="w") as (_, fds):
        yield go, fds


async def test_an_escaped_writer_cannot_grow_the_output_past_the_cap_after_the_stop(
    capped: DaemonHandle,
    short_tmp: Path,
) -> None:
    async with capped.session() as session, escaped_writer(session, short_tmp, "; sleep 300") as (go, fds):
        await trio.to_thread.run_sync(go.write_bytes, b"go\n")
        ended = structured(await call(session, "status", id="w", wait_seconds=30))
        assert ended["state"] == "stopped"
        assert ended["stop_reason"] == "output_cap"
        out = capped.task_file("w", ".out")
        at_stop = out.stat().st_size
        await all_exit(fds)
        assert out.stat().st_size == at_stop
        # Cut short by a check (SIGKILL without waiting out the grace), or by the file size
        # limit (SIGXFSZ): never more than 8 MiB past the cap, however fast the writer.
        assert CAP < at_stop <= CAP + 8 * 1024**2, at_stop


async def test_a_finished_tasks_leftover_writer_is_stopped_at_the_cap(
    capped: DaemonHandle, short_tmp: Path
) -> None:
    async with capped.session() as session:
        # The task ends at once (done); its writer goes on in a session of its own.
        async with escaped_writer(session, short_tmp, "") as (go, fds):
            done = structured(await call(session, "status", id="w", wait_seconds=30))
            assert done["state"] == "done"
            await trio.to_thread.run_sync(go.write_bytes, b"go\n")
            await all_exit(fds)
        out = capped.task_file("w", ".out")
        after = out.stat().st_size
        assert CAP < after < CAP + 8 * 1024**2
        status = structured(await call(session, "status", id="w"))
        assert status["state"] == "done"
        assert any("kept writing" in note for note in status["notes"]), status["notes"]
        assert out.stat().st_size == after


class BlockingStore(TaskStore):
    """A store whose output_size blocks until ``release`` is set, and says when it has begun."""

    release: threading.Event
    entered: trio.Event
    token: trio.lowlevel.TrioToken

    def output_size(self, task_id: str) -> int:
        trio.from_thread.run_sync(self.entered.set, trio_token=self.token)
        self.release.wait(30)
        return super().output_size(task_id)


async def test_the_interval_checks_run_off_the_event_loop(short_tmp: Path) -> None:
    store = BlockingStore(short_tmp / "state")
    store.release = threading.Event()
    store.entered = trio.Event()
    store.token = trio.lowlevel.current_trio_token()
    store.create_dirs()
    settings = TaskSettings(workdir=short_tmp, output_check_interval=0.01, kill_grace=1)
    manager = TaskManager(store, settings, WakeCourier())
    tools = BashTools(manager)
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.serve)
        try:
            started = await tools.call("run", {"cmd": "sleep 30", "name": "s", "wait_seconds": 0})
            assert not started.is_error, started.text
            with trio.fail_after(10):
                await store.entered.wait()
            # The check is stuck in its stat; the loop still answers.
            with trio.fail_after(5):
                status = await tools.call("status", {"id": "s"})
            assert status.structured["state"] == "running"
        finally:
            store.release.set()
        stopped = await tools.call("stop", {"id": "s"})
        assert stopped.structured["state"] == "stopped"
        nursery.cancel_scope.cancel()


async def test_a_restarted_daemon_still_stops_every_process_of_a_task(daemon: DaemonHandle) -> None:
    """After a restart the escaped processes are no longer the daemon's children: the tag finds them."""
    fifo = make_fifo(daemon.root)
    async with daemon.running("--kill-grace", "0.3", agent=False), daemon.session() as session:
        cmd = probe_tree(daemon.root, then="sleep 300")
        await call(session, "run", cmd=cmd, name="tree", wait_seconds=0)
        await wait_ready(fifo)
    with pinned(daemon.root) as fds:
        async with daemon.running("--kill-grace", "0.3", agent=False), daemon.session() as session:
            stopped = structured(await call(session, "stop", id="tree"))
            assert stopped["state"] == "stopped"
            await all_exit(fds)


REAPER = """
import os, select, sys
from pathlib import Path
from hive.bash.procs import _procs

assert _procs.become_subreaper()
root = Path(sys.argv[1])
# A wrapper of ours that exits with 7: its status belongs to Child.wait.
(root / "cmd").write_bytes(b"exit 7")
cmd = os.open(root / "cmd", os.O_RDONLY)
exit_fd = os.open(root / "exit", os.O_WRONLY | os.O_CREAT, 0o600)
out = os.open(os.devnull, os.O_WRONLY)
child = _procs.spawn_task(cmd_fd=cmd, exit_fd=exit_fd, exit_file=root / "exit", mark="m", tag="t:1",
                          cwd=root, stdout=out, stderr=out)
# An orphan: a child's child whose parent exits first, so it is re-parented to us.
pid_r, pid_w = os.pipe()
go_r, go_w = os.pipe()
middle = os.fork()
if middle == 0:
    pid = os.fork()
    if pid == 0:
        os.read(go_r, 1)  # until the middle process has gone
        os._exit(3)
    os.write(pid_w, str(pid).encode().ljust(16))
    os._exit(0)
orphan = int(os.read(pid_r, 16))
os.waitpid(middle, 0)
os.write(go_w, b"x")
for pid in (orphan, child.pid):  # both exited, neither reaped: zombies
    fd = os.pidfd_open(pid)
    select.select([fd], [], [], 10)
    os.close(fd)
# As the daemon does each interval: the orphan is reaped, the wrapper left to Child.wait.
assert _procs.scan_tasks({}, reap=True) == {}
assert not os.path.exists(f"/proc/{orphan}")
assert os.path.exists(f"/proc/{child.pid}")
assert os.waitstatus_to_exitcode(os.waitpid(child.pid, 0)[1]) == 7 and int((root / "exit").read_text()) == 7  # the wrapper exits with it too
print("ok")
"""


async def test_the_reaper_takes_adopted_orphans_and_leaves_the_wrappers_to_their_waiters(
    short_tmp: Path,
) -> None:
    # In a process of its own: it becomes the child subreaper, which pytest must not.
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-c", REAPER, str(short_tmp)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"ok\n"


async def test_a_leftover_writer_of_a_task_that_ended_before_a_restart_is_still_held_to_the_cap(
    daemon: DaemonHandle,
) -> None:
    fifo, go = make_fifo(daemon.root), make_fifo(daemon.root, "go")
    cap = 200 * 1024
    async with daemon.running(agent=False), daemon.session() as session:
        # The task ends at once (done); its writer waits in a session of its own.
        cmd = f"cd {shlex.quote(str(daemon.root))}; {WRITER}; echo ready > ready"
        await call(session, "run", cmd=cmd, name="w", wait_seconds=0)
        await wait_ready(fifo)
        done = structured(await call(session, "status", id="w", wait_seconds=30))
        assert done["state"] == "done"
    with pinned(daemon.root, ("writer",)) as fds:
        # A grace longer than the test's guard: the writer ignores SIGINT, so only a grace cut
        # short for the cap ends it in time.
        extra = ("--kill-grace", "60", "--max-output-bytes", str(cap), "--output-check-secs", "0.05")
        async with daemon.running(*extra, agent=False), daemon.session() as session:
            await trio.to_thread.run_sync(go.write_bytes, b"go\n")
            await all_exit(fds)
            status = structured(await call(session, "status", id="w"))
    after = daemon.task_file("w", ".out").stat().st_size
    assert cap < after < cap + 8 * 1024**2
    assert status["state"] == "done"
    assert any("kept writing" in note for note in status["notes"]), status["notes"]


async def test_the_leftovers_of_a_stop_cut_short_by_a_daemon_crash_are_stopped_after_the_restart(
    daemon: DaemonHandle,
) -> None:
    fifo = make_fifo(daemon.root)
    # The wrapper ends at the stop's SIGINT; a deaf process in a session of its own stays, and
    # the daemon dies in the grace before its SIGKILL.
    deaf = "setsid sh -c 'trap \"\" INT; exec sleep 300' & echo $! > deaf.pid"
    cmd = f"cd {shlex.quote(str(daemon.root))}; {deaf}; echo ready > ready; sleep 300"
    async with daemon.running("--kill-grace", "60", agent=False, stop=False) as first:
        async with daemon.session() as session:
            await call(session, "run", cmd=cmd, name="cut", wait_seconds=0)
            await wait_ready(fifo)
            wrapper = structured(await call(session, "status", id="cut"))["pid"]
            wrapper_fd = os.pidfd_open(wrapper)
            try:
                async with trio.open_nursery() as nursery:
                    # Its answer would come after the grace; the daemon is killed long before.
                    nursery.start_soon(session.call_tool, "stop", {"id": "cut"})
                    with trio.fail_after(20):
                        await trio.lowlevel.wait_readable(wrapper_fd)
                    nursery.cancel_scope.cancel()
            finally:
                os.close(wrapper_fd)
        with pinned(daemon.root, ("deaf",)) as fds:
            os.kill(first.pid, signal.SIGKILL)
            await first.wait()
            # Its leftovers are found at its first interval's check, and the grace is long over.
            restart = ("--kill-grace", "0.3", "--output-check-secs", "0.05")
            async with daemon.running(*restart, agent=False), daemon.session() as session:
                # Deaf to SIGINT: only the SIGKILL after the grace ends it.
                await all_exit(fds)
                status = structured(await call(session, "status", id="cut"))
    assert (status["state"], status["stop_reason"]) == ("stopped", "requested")
    notes = " / ".join(status["notes"])
    assert "were still running" in notes and "they were stopped" in notes, notes


def _escaped_writer(root: Path) -> str:
    """A task that leaves a writer behind: its own session, a cleared environment, waiting for go."""
    head = shutil.which("head")
    assert head is not None
    inner = f"read go < go; exec {head} -c 67108864 /dev/zero"
    return (
        f"cd {shlex.quote(str(root))}; (setsid env -i sh -c {shlex.quote(inner)} & echo $! > writer.pid); "
        "echo ready > ready"
    )


async def test_a_leftover_writer_faster_than_the_check_is_held_within_8_mib_of_the_cap(
    daemon: DaemonHandle,
) -> None:
    fifo, go = make_fifo(daemon.root), make_fifo(daemon.root, "go")
    cap = 1024**2
    extra = ("--max-output-bytes", str(cap), "--output-check-secs", "30")
    async with daemon.running(*extra, agent=False), daemon.session() as session:
        await call(session, "run", cmd=_escaped_writer(daemon.root), name="w", wait_seconds=0)
        await wait_ready(fifo)
        with pinned(daemon.root, ("writer",)) as fds:
            await trio.to_thread.run_sync(go.write_bytes, b"go\n")
            await all_exit(fds)
        size = daemon.task_file("w", ".out").stat().st_size
        assert cap < size <= cap + 8 * 1024**2, size


def _cgroups_usable() -> bool:
    parent = _cgroups.own_cgroup_dir()
    if parent is None:
        return False
    probe = parent / f"hive-test-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


needs_cgroups = pytest.mark.skipif(not _cgroups_usable(), reason="needs a writable cgroup v2 hierarchy")

# Its own session, a cleared environment, orphaned at once (a double fork), and deaf to SIGINT.
HIDDEN = (
    "(setsid env -i sh -c 'trap \"\" INT; echo $$ > hidden.pid; exec sleep 300' &); "
    "until [ -s hidden.pid ]; do sleep 0.01; done; echo ready > ready"
)


@needs_cgroups
@pytest.mark.parametrize("how", ["stop", "timeout"])
async def test_a_cleared_environment_in_a_double_fork_does_not_outlive_a_stop(
    short_grace: DaemonHandle, short_tmp: Path, how: str
) -> None:
    cmd = f"cd {shlex.quote(str(short_tmp))}; {HIDDEN}; sleep 300"
    ended = await ended_after(short_grace, short_tmp, cmd, how, name="h", pin="hidden", timeout_secs=1)
    assert ended["held_by"] == "cgroup"
    assert ended["signals"] == ["SIGINT", "SIGKILL"]
    parent = task_cgroup_parent(short_grace.state_dir)
    assert parent is not None
    assert not _cgroups.populated(
        parent / json.loads(short_grace.task_file("h", ".json").read_bytes())["serial"]
    )


@needs_cgroups
async def test_a_restarted_daemon_stops_a_cleared_environment_by_its_cgroup_and_clears_stray_ones(
    daemon: DaemonHandle,
) -> None:
    fifo = make_fifo(daemon.root)
    async with daemon.running("--kill-grace", "0.3", agent=False), daemon.session() as session:
        cmd = f"cd {shlex.quote(str(daemon.root))}; {HIDDEN}; sleep 300"
        await call(session, "run", cmd=cmd, name="h", wait_seconds=0)
        await wait_ready(fifo)
    parent = task_cgroup_parent(daemon.state_dir)
    assert parent is not None and parent.is_dir()
    # A task cgroup that no task of this state directory owns, with a process in it.
    stray = parent / "0123456789abcdef"
    procs = os.open(_cgroups_mkdir(stray) / "cgroup.procs", os.O_WRONLY)
    sleeper = await trio.lowlevel.open_process(
        ["sh", "-c", 'printf 0 >&"$0"; exec sleep 300', str(procs)], pass_fds=(procs,)
    )
    os.close(procs)
    with pinned(daemon.root, ("hidden",)) as fds:
        async with daemon.running("--kill-grace", "0.3", agent=False), daemon.session() as session:
            with trio.fail_after(15):
                await sleeper.wait()
            assert not stray.exists()
            stopped = structured(await call(session, "stop", id="h"))
            assert stopped["state"] == "stopped"
            assert stopped["held_by"] == "cgroup"
            await all_exit(fds)


def _cgroups_mkdir(path: Path) -> Path:
    path.mkdir()
    return path


async def test_without_cgroups_the_subreaper_holds_the_task_and_status_says_so(daemon: DaemonHandle) -> None:
    fifo = make_fifo(daemon.root)
    async with (
        daemon.running("--kill-grace", "0.3", "--no-cgroups", agent=False),
        daemon.session() as session,
    ):
        cmd = probe_tree(daemon.root, then="sleep 300")
        await call(session, "run", cmd=cmd, name="tree", wait_seconds=0)
        await wait_ready(fifo)
        with pinned(daemon.root) as fds:
            result = await call(session, "stop", id="tree")
            await all_exit(fds)
        stopped = structured(result)
        assert stopped["state"] == "stopped"
        assert stopped["held_by"] == "subreaper"
        assert "held by: subreaper" in text_of(result)
        parent = task_cgroup_parent(daemon.state_dir)
        assert parent is None or not parent.exists()


@pytest.mark.parametrize("through", ["clone3", "subprocess"])
async def test_a_wrapper_whose_wait_is_given_up_is_kept_not_collected_as_a_leak(
    short_tmp: Path, through: str
) -> None:
    # A daemon stopping while a task runs gives up its wait: the task runs on (a restarted daemon
    # adopts it), and the wrapper's Popen (where it was started through subprocess), collected
    # later, must not warn of a process left unwaited.
    from hive.bash.procs import _procs

    if through == "clone3" and not clone3_usable():
        pytest.skip("hive._clone3 is not built here, or the kernel has no clone3")

    (short_tmp / "cmd").write_bytes(b"exec sleep 60")
    cmd = os.open(short_tmp / "cmd", os.O_RDONLY)
    exit_fd = os.open(short_tmp / "exit", os.O_WRONLY | os.O_CREAT, 0o600)
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        with without_clone3() if through == "subprocess" else contextlib.nullcontext():
            child = _procs.spawn_task(
                cmd_fd=cmd,
                exit_fd=exit_fd,
                exit_file=short_tmp / "exit",
                mark="m",
                tag="t:1",
                cwd=short_tmp,
                stdout=out,
                stderr=out,
            )
    finally:
        for fd in (cmd, exit_fd, out):
            os.close(fd)
    pid = child.pid
    with trio.CancelScope() as scope:
        scope.cancel()
        await child.wait()
    del child, scope
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gc.collect()
    os.killpg(pid, signal.SIGINT)
    left = [p for p in _procs._wrappers.left if p.pid == pid]
    if through == "clone3":
        assert not left  # no Popen to keep: the pid is reaped as any other child
        pidfd = os.pidfd_open(pid)
        await trio.lowlevel.wait_readable(pidfd)
        os.close(pidfd)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, os.WNOHANG)[1]) != 0  # noqa: ASYNC222 - it has exited
        return
    assert len(left) == 1
    assert left[0].wait() != 0
    _procs._wrappers.left.remove(left[0])
