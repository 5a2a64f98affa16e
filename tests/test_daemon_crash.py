"""Crash consistency: no task is lost, none ends in a wrong state, and every run's end the agent
was not told inline reaches it as a wake with that run's own end id (a repeat only with the same
end id), whenever the daemon dies.

In-process, the deaths are deterministic: a store that dies at its Nth write (Hypothesis choosing
N, and whether it dies again during the recovery, whether the disk fills up first, whether it
dies on a wake before reading its acknowledgement), with `run` calls in flight, some reusing the
names of earlier runs; then a fresh manager recovers from the same directory.

As processes, a few rounds: the daemon SIGKILLed at moments drawn from a random generator with a
fixed seed (HIVE_CRASH_SEED=<seed> draws others; the seed is printed), sometimes again during its
recovery, and in some rounds with its state directory (a small tmpfs of its own) filled up at one
of those moments. Each round also runs a watched task (``notify_on``) that prints a matching line
at once and another after the daemon has most likely been killed: every matching line in its
output reaches the agent in a match wake of that run, under one id. The sleeps there are those
moments, the experiment itself; everything the test checks is awaited.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive.agent_socket import AgentRequest, Wake
from hive.bash import BashTools
from tests.helpers.daemon import DaemonHandle, remove_task_cgroups
from tests.helpers.inotify import wait_until
from tests.helpers.jsonrpc import answer, open_raw_session, run_request, send
from tests.helpers.listener import AgentListener
from tests.helpers.results import call, structured
from tests.helpers.stores import Crash, CrashingStore
from tests.helpers.tools import serving_tools

ROUNDS = 3
SEED = 4
"""Drawn so that its rounds fill the disk (once still full as the daemon recovers), kill the daemon
during its recovery and on a wake."""
SHARED_NAMES = ("n0", "n1", "n2")
"""Names that runs of different rounds reuse: each run's end is owed on its own."""


DISK_BYTES = 16 * 1024 * 1024


@contextlib.contextmanager
def small_disk(path: Path) -> Iterator[bool]:
    """The state directory on a tmpfs of its own, so that the test can fill it; False where
    mounting is not permitted (then the rounds run without the full-disk move)."""
    path.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0700", "tmpfs", str(path)]
    try:
        subprocess.run(mount, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


@attrs.define
class Filler:
    """Fills the state directory's file system to the last byte, and empties it again."""

    path: Path
    fills: int = 0

    def fill(self) -> None:
        self.fills += 1
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        block = b"\0" * 65536
        try:
            while True:
                os.write(fd, block)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)

    def empty(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@attrs.define
class Run:
    tag: str
    cmd: str
    arguments: dict[str, Any]
    expected_state: str
    expected_code: int | None
    answer: dict[str, Any] | None = None


def draw_run(rng: random.Random, tag: str, markers: Path, *, brief: bool = False) -> Run:
    """A run to issue: its command (which first leaves a marker that it ran), its arguments, and
    the end it must come to. ``brief``: shorter sleeps (in-process, where each example pays them)."""
    code = rng.randrange(8)
    kind = rng.choice(["quick", "short", "long", "timed"])
    long = 0.3 if brief else round(rng.uniform(0.4, 1.2), 2)
    seconds = {"quick": 0, "short": 0.1 if brief else 0.2, "long": long, "timed": 30}[kind]
    cmd = f"touch {markers}/{tag}; sleep {seconds}; exit {code}"
    # Every field (full): an error's kind, an end's exit code even when it has none, the previous run's end.
    arguments: dict[str, Any] = {"cmd": cmd, "wait_seconds": rng.choice([0, 0.1, 0.5, 3, 5]), "full": True}
    if rng.random() < 0.3:
        arguments["name"] = rng.choice(SHARED_NAMES)
    elif rng.random() < 0.5:
        arguments["name"] = tag
    if kind == "timed":
        arguments["timeout_secs"] = 0.2 if brief else rng.choice([0.3, 0.8])
        return Run(tag, cmd, arguments, "timed_out", None)
    if rng.random() < 0.3:
        arguments["timeout_secs"] = 20
    return Run(tag, cmd, arguments, "done", code)


WATCHED_AFTER = 1.5
"""How long a watched run waits before its second matching line: past the round's kill, mostly."""


def watched_run(round_no: int, markers: Path) -> Run:
    """The round's watched run: a matching line on stdout at once, one on stderr `WATCHED_AFTER`
    later (drawing nothing from the rounds' generator, so that the seed's rounds stay as drawn).
    It ends ``done`` with 0 even where a full disk refused a line."""
    tag = f"r{round_no}w"
    cmd = f"touch {markers}/{tag}; echo hit {tag} a; sleep {WATCHED_AFTER}; echo hit {tag} b >&2; exit 0"
    return Run(tag, cmd, {"cmd": cmd, "name": tag, "notify_on": "^hit ", "wait_seconds": 0}, "done", 0)


def matching_lines(tasks_dir: Path, recorded: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """The matching lines in each watched run's output, as a match wake shows them, by the run's
    end id (its match wakes' ids start with it)."""
    lines = {}
    for record in recorded.values():
        if record.get("notify_on") is None:
            continue
        found = set()
        for stream, suffix in (("stdout", ".out"), ("stderr", ".err")):
            with contextlib.suppress(FileNotFoundError):
                text = (tasks_dir / f"{record['id']}{suffix}").read_text()
                found |= {f"[{stream}] {line}" for line in text.splitlines() if line.startswith("hit ")}
        lines[f"{record['id']}:{record['serial']}"] = found
    return lines


def is_match_wake(wake: Wake) -> bool:
    return ":m" in (wake.end_id or "")


def lines_told(wakes: list[Wake], recorded: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    """The match wakes' ids that told each line, by the run's end id and the line, once each
    is checked to be of a watched run that was: its sender, and its id that run's own. A wake
    counts as it first arrived: the agent drops a repeat of an id (whatever its body)."""
    runs_of = {f"{r['id']}:{r['serial']}": r for r in recorded.values()}
    first: dict[str, Wake] = {}
    for wake in filter(is_match_wake, wakes):
        first.setdefault(wake.end_id or "", wake)
    told: dict[str, set[str]] = defaultdict(set)
    for match_id, wake in first.items():
        end_id, _, number = match_id.rpartition(":m")
        assert end_id in runs_of and number.isdigit(), (wake.sender, match_id)
        assert wake.sender == f"bash-task-{runs_of[end_id]['id']}"
        for line in wake.body.splitlines()[1:]:
            told[f"{end_id} {line}"].add(match_id)
    return told


async def issue(path: Path, run: Run) -> None:
    """Call `run` on a connection of its own; keep the answer if one comes before the daemon dies."""
    try:
        stream, reader = await open_raw_session(path)
        async with stream:
            await send(stream, run_request(2, **run.arguments))
            got = await answer(reader, 2)
            if "structuredContent" not in got:  # every answer to a full call has it: say which did not
                raise LookupError(f"run({run.arguments}) answered without structuredContent: {got}")
            run.answer = got["structuredContent"]
    except (OSError, trio.BrokenResourceError, AssertionError, ValueError):
        pass  # the daemon was killed before it answered


async def kill(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    await process.wait()


@attrs.define
class KillingListener(AgentListener):
    """An agent socket that, when armed, SIGKILLs the daemon on a wake before acknowledging it:
    the daemon never learns it was delivered, so it comes again (the same end, the same end_id)."""

    daemon: trio.Process | None = None
    armed: bool = False
    kills: int = 0

    async def _take(self, request: AgentRequest) -> None:
        await super()._take(request)
        if self.armed and self.daemon is not None and self.daemon.returncode is None:
            self.armed = False
            self.kills += 1
            os.kill(self.daemon.pid, signal.SIGKILL)


async def kill_in_recovery(rng: random.Random, daemon: DaemonHandle) -> None:
    """Start the daemon and SIGKILL it while it recovers (or just after: its start-up time varies)."""
    with open(daemon.root / "daemon.err", "ab") as err:
        again = await trio.lowlevel.open_process(
            [sys.executable, "-m", "hive.bash.daemon", *daemon.args()], stderr=err
        )
    await trio.sleep(rng.uniform(0.2, 2.0))
    await kill(again)


def every_run_on_disk(tasks_dir: Path) -> dict[str, dict[str, Any]]:
    """The record of every run, the latest of a name and those moved aside (``<id>.json.<n>``), by command."""
    found = {}
    for path in tasks_dir.iterdir():
        name, _, generation = path.name.partition(".json")
        if name and (generation == "" or generation[1:].isdigit()) and path.name != name:
            record = json.loads(path.read_text())
            found[record["cmd"]] = record
    return found


def refused(run: Run) -> bool:
    """Refused at once (a shared name still held by a running task, or no room on the disk to record
    it): nothing ran, nothing is owed."""
    return run.answer is not None and "error" in run.answer


def ends_told_and_owed(runs: list[Run], on_disk: dict[str, dict[str, Any]]) -> tuple[set[str], set[str]]:
    """The runs whose end an answer told (by tag), and the end ids of those recorded whose end
    is still owed to the agent."""
    told = {
        run.tag for run in runs if run.answer is not None and run.answer.get("state") not in (None, "running")
    }
    # An answer reusing a name reports the previous run's end too: told, if it matches one.
    told_as_previous = {
        (p["id"], p["state"], p["exit_code"])
        for run in runs
        if run.answer is not None and (p := run.answer.get("previous")) is not None
    }
    owed = {
        f"{record['id']}:{record['serial']}"
        for run in runs
        if (record := on_disk.get(run.cmd)) is not None
        and run.tag not in told
        and (record["id"], record["state"], record["exit_code"]) not in told_as_previous
    }
    return told, owed


def judge(
    runs: list[Run], final: dict[str, dict[str, Any]], markers: Path, told: set[str]
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The runs lost, and those whose final record is not the end they had to come to."""
    lost: list[str] = []
    wrong: list[tuple[Any, ...]] = []
    for run in runs:
        task = final.get(run.cmd)
        ran = (markers / run.tag).exists()
        if refused(run):
            if ran or task is not None:
                wrong.append((run.tag, "refused", "yet it ran or was recorded"))
            continue
        if task is None:
            if ran or run.answer is not None:
                lost.append(run.tag)
            continue
        if not ran:
            # Recorded, then the daemon died before its process started: it never ran. (Or it
            # started, and its deadline came before its first command did.)
            stopped_first = run.expected_state == "timed_out" and task["state"] == "timed_out"
            if task["state"] != "interrupted" and not stopped_first:
                wrong.append((run.tag, task["state"], "interrupted", run.arguments, task.get("notes")))
            continue
        if task["state"] != run.expected_state or (
            run.expected_code is not None and task["exit_code"] != run.expected_code
        ):
            got, expected = (task["state"], task["exit_code"]), (run.expected_state, run.expected_code)
            wrong.append((run.tag, got, expected, run.arguments, task.get("notes")))
        if run.tag in told:
            assert run.answer is not None
            assert (run.answer["state"], run.answer["exit_code"]) == (task["state"], task["exit_code"])
    assert all(task["state"] not in ("pending", "running") for task in final.values())
    return lost, wrong


def wakes_by_end(wakes: list[Wake], recorded: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The wakes' bodies by end id, once each is checked to name a run that was: its sender,
    and its end id that run's own."""
    runs_of = {f"{r['id']}:{r['serial']}": r for r in recorded.values()}
    wakes_of: dict[str, list[str]] = defaultdict(list)
    for wake in wakes:
        assert wake.end_id in runs_of, (wake.sender, wake.end_id)
        assert wake.sender == f"bash-task-{runs_of[wake.end_id]['id']}"
        wakes_of[wake.end_id].append(wake.body)
    return wakes_of


async def test_sigkills_at_random_moments_lose_no_task_and_no_end(daemon: DaemonHandle) -> None:
    seed = int(os.environ.get("HIVE_CRASH_SEED") or SEED)
    print(f"crash consistency: seed {seed} (HIVE_CRASH_SEED={seed} draws it again)")
    rng = random.Random(seed)
    markers = daemon.root / "ran"
    markers.mkdir()
    runs: list[Run] = []
    agent = KillingListener(daemon.agent_socket)
    kills = recovery_kills = 0
    with small_disk(daemon.state_dir) as can_fill:
        if not can_fill:
            print("crash consistency: tmpfs cannot be mounted here; no round fills the disk")
        filler = Filler(daemon.state_dir / "filler")
        async with agent.serving():
            for round_no in range(ROUNDS):
                full = can_fill and rng.random() < 0.3
                async with daemon.running(stop=False) as process, trio.open_nursery() as nursery:
                    agent.daemon, agent.armed = process, rng.random() < 0.3
                    batch = [draw_run(rng, f"r{round_no}t{i}", markers) for i in range(rng.randint(3, 6))]
                    batch.append(watched_run(round_no, markers))
                    runs += batch
                    for run in batch:
                        nursery.start_soon(issue, daemon.socket, run)
                    if full:
                        await trio.sleep(rng.uniform(0, 0.4))
                        filler.fill()
                    await trio.sleep(rng.uniform(0.05, 0.8))
                    agent.armed = False
                    if process.returncode is None:
                        await kill(process)
                        kills += 1
                if full and rng.random() < 0.5:
                    filler.empty()  # else it is still full while the daemon recovers
                if rng.random() < 0.4:
                    await kill_in_recovery(rng, daemon)
                    kills += 1
                    recovery_kills += 1
                filler.empty()
            async with daemon.running(), daemon.session() as session:
                structured(await call(session, "list", limit=0))  # recovered
                on_disk = every_run_on_disk(daemon.state_dir / "bash-tasks")
                told, owed = ends_told_and_owed(runs, on_disk)
                with trio.fail_after(45):
                    await agent.wait_for_ends(owed)
                # The final records: the latest runs' as `list` shows them, the earlier ones' as set aside.
                listed = {t["cmd"]: t for t in structured(await call(session, "list", limit=0))["tasks"]}
                recorded = every_run_on_disk(daemon.state_dir / "bash-tasks")
                final = {**recorded, **listed}
                printed = {
                    f"{end_id} {line}"
                    for end_id, lines in matching_lines(daemon.state_dir / "bash-tasks", recorded).items()
                    for line in lines
                }
                with trio.move_on_after(45):
                    while not printed <= lines_told(agent.wakes, recorded).keys():
                        await agent.wait_for(len(agent.wakes) + 1)

    lost, wrong = judge(runs, final, markers, told)
    told_ids = lines_told(agent.wakes, recorded)
    never_told = printed - told_ids.keys()
    told_twice = {line: ids for line, ids in told_ids.items() if len(ids) > 1}
    wakes_of = wakes_by_end([w for w in agent.wakes if not is_match_wake(w)], recorded)
    repeats = len(agent.wakes) - len(wakes_of)
    disk_refusals = sum(1 for r in runs if refused(r) and "space" in json.dumps(r.answer))
    reused = sum(1 for r in final.values() if r["id"] in SHARED_NAMES)
    print(
        f"crash consistency: {ROUNDS} rounds, {len(runs)} runs, {len(final)} tasks "
        f"({reused} under reused names, {sum(refused(r) for r in runs)} refused: {disk_refusals} for want of space), "
        f"{kills + agent.kills} kills ({recovery_kills} during recovery, {agent.kills} on a wake), "
        f"{len(agent.wakes)} wakes, {repeats} repeats, "
        f"{len(told)} ends told inline, {len(owed)} owed, the disk filled {filler.fills} times, "
        f"{len(printed)} matching lines printed by watched runs, {len(never_told)} never told"
    )
    assert not lost, f"lost tasks (seed {seed}): {lost}"
    assert not wrong, f"wrong final states (seed {seed}): {wrong}"
    assert not never_told, f"matching lines never told (seed {seed}): {sorted(never_told)}"
    assert not told_twice, f"matching lines told under two ids (seed {seed}): {told_twice}"


# -- in-process: a store that dies at its Nth write -----------------------------------------------


@attrs.define
class DyingListener(AgentListener):
    """The agent socket of a daemon that may die: a wake is refused once the daemon's store is
    dead (a dead daemon sends none), and with ``die_on_wake`` the daemon dies as the first wake
    arrives, before it reads the acknowledgement (so the same end comes again)."""

    store: CrashingStore | None = None
    die_on_wake: bool = False

    async def _take(self, request: AgentRequest) -> None:
        if self.store is None or self.store.crashed:
            raise RuntimeError("the daemon that sent this is dead")
        await super()._take(request)
        if self.die_on_wake:
            self.die_on_wake = False
            self.store.crash()


async def issue_in_process(tools: BashTools, store: CrashingStore, run: Run) -> None:
    """Call `run`; its answer counts only if it left the daemon before it died."""
    result = await tools.call("run", run.arguments)
    if store.crashed:
        return
    run.answer = result.structured
    if result.delivered is not None:
        result.delivered(True)


async def run_until_death(
    root: Path, listener: DyingListener, store: CrashingStore, runs: list[Run], *, issue: bool
) -> dict[str, dict[str, Any]] | None:
    """One life of the daemon in this process: ``runs`` issued at once (if ``issue``), then every
    task waited for (with answers that reach nobody, so their ends stay owed) and the wake of
    every end of ``runs`` still owed. It ends when ``store`` dies, or, if it never does, with an
    orderly stop; then the records it showed (by command), or None if it died."""
    listener.store = store
    token = trio.lowlevel.current_trio_token()
    with trio.fail_after(60), trio.CancelScope() as life:
        store.on_crash = lambda: token.run_sync_soon(life.cancel)
        try:
            async with serving_tools(root, store=store, agent_socket=listener.path, kill_grace=1.0) as tools:
                async with trio.open_nursery() as calls:
                    for run in runs if issue else []:
                        calls.start_soon(issue_in_process, tools, store, run)
                manager = tools.manager
                for record in manager.newest_first():
                    while not manager.get(record.id).final:
                        waited = await tools.call("status", {"id": record.id, "wait_seconds": 30})
                        if waited.delivered is not None:
                            waited.delivered(False)
                if store.crash_at is not None:
                    store.crash()  # it was to die, and has not yet: it dies now
                    await trio.sleep_forever()
                # The latest runs as the manager knows them (their final records may be on their way
                # to the disk), the earlier ones as set aside.
                listed = {r.cmd: attrs.asdict(r, value_serializer=_plain) for r in manager.newest_first()}
                _told, owed = ends_told_and_owed(runs, {**every_run_on_disk(store.tasks_dir), **listed})
                await listener.wait_for_ends(owed)
                return listed
        except* Crash:
            pass
    await trio.to_thread.run_sync(store.wait_until_started)
    await _first_commands_run(store, runs)
    return None


async def _first_commands_run(store: CrashingStore, runs: list[Run]) -> None:
    """Until every task the dead daemon started has run its first command (left its marker) or
    written its exit status. A restart comes long after that outside this process; here the next
    life would start within a millisecond of a spawn, when the new wrapper's /proc/<pid>/cmdline
    may still be empty (the kernel sets it up after the exec the spawn waited for), so that
    recovery would not know it by its mark: a race no real restart meets."""
    by_cmd = {run.cmd: run for run in runs}
    for task_id, cmd in store.spawned:
        run = by_cmd.get(cmd.decode())
        if run is None:
            continue
        marker = Path(run.cmd.split()[1].removesuffix(";"))
        exit_file = store.exit_path(task_id)

        def begun(marker: Path = marker, exit_file: Path = exit_file) -> bool:
            return marker.exists() or bool(exit_file.read_bytes().strip())

        await wait_until(begun, marker.parent, exit_file.parent)


def _plain(_instance: object, _field: object, value: Any) -> Any:
    """Record fields as their JSON values (enums by value), as `list` and the disk show them."""
    return getattr(value, "value", value)


@attrs.frozen
class Deaths:
    """Where the daemon dies: at its ``first``-th write; during its recovery, at that one's
    ``in_recovery``-th write (None: it recovers); and the disk full from its ``full_at``-th
    write, still full during the recovery if ``full_in_recovery``; and dying on the first
    wake rather than at a write if ``on_wake``."""

    first: int
    in_recovery: int | None
    full_at: int | None
    full_in_recovery: bool
    on_wake: bool


deaths = st.builds(
    Deaths,
    first=st.integers(1, 8) | st.integers(9, 60),  # a run's start is its first writes
    in_recovery=st.none() | st.integers(1, 20),
    full_at=st.none() | st.integers(1, 40),
    full_in_recovery=st.booleans(),
    on_wake=st.booleans(),
)


# The dead managers' children run on (as a dead daemon's tasks do), so their Popen objects are
# collected while the processes live, reported as unraisable warnings.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@settings(max_examples=20, derandomize=True, suppress_health_check=[HealthCheck.data_too_large])
@given(where=deaths, rng=st.randoms(use_true_random=False), count=st.integers(2, 5))
def test_a_daemon_dying_at_any_write_loses_no_task_and_no_end(
    where: Deaths, rng: random.Random, count: int
) -> None:
    root = Path(tempfile.mkdtemp(prefix="hive-cr-", dir="/tmp"))
    try:
        trio.run(_die_and_recover, root, where, rng, count)
    finally:
        remove_task_cgroups(root / "state")
        shutil.rmtree(root, ignore_errors=True)


async def _die_and_recover(root: Path, where: Deaths, rng: random.Random, count: int) -> None:
    markers = root / "ran"
    markers.mkdir()
    runs = [draw_run(rng, f"t{i}", markers, brief=True) for i in range(count)]
    listener = DyingListener(root / "agent.sock", die_on_wake=where.on_wake)
    state = root / "state"
    async with listener.serving():
        first = CrashingStore(state, crash_at=None if where.on_wake else where.first, full_at=where.full_at)
        await run_until_death(root, listener, first, runs, issue=True)
        listener.die_on_wake = False  # on the first life's first wake only
        if where.in_recovery is not None:
            full_at = 1 if where.full_at is not None and where.full_in_recovery else None
            recovering = CrashingStore(state, crash_at=where.in_recovery, full_at=full_at)
            await run_until_death(root, listener, recovering, runs, issue=False)
        listed = await run_until_death(root, listener, CrashingStore(state), runs, issue=False)
    assert listed is not None, "the last life was to end in an orderly stop"
    recorded = every_run_on_disk(state / "bash-tasks")
    told, _owed = ends_told_and_owed(runs, recorded)
    final = {**recorded, **listed}
    lost, wrong = judge(runs, final, markers, told)
    wakes_by_end(listener.wakes, recorded)
    assert not lost, f"lost tasks ({where}): {lost}"
    assert not wrong, f"wrong final states ({where}): {wrong}"
