"""Crash consistency: the daemon SIGKILLed at random moments, with `run` calls in flight and
sometimes again during its recovery, some of them reusing the names of earlier runs, and in some
rounds with its state directory (a small tmpfs of its own) filled up at a random moment; afterwards
no task is lost, none ends in a wrong state, and every run's end the agent was not told inline
reaches it as a wake with that run's own end id (a repeat only with the same end id).

The moments are drawn from a seeded random generator; the seed is printed (HIVE_CRASH_SEED=<seed>
runs the same draw again). The sleeps below are those random moments, the experiment itself;
everything the test checks is awaited.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from hive.wake import AgentRequest
from tests.helpers.daemon import DaemonHandle
from tests.helpers.jsonrpc import answer, open_raw_session, run_request, send
from tests.helpers.listener import AgentListener
from tests.helpers.results import call, structured

ROUNDS = 10
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


def draw_run(rng: random.Random, tag: str, markers: Path) -> Run:
    code = rng.randrange(8)
    kind = rng.choice(["quick", "short", "long", "timed"])
    seconds = {"quick": 0, "short": 0.2, "long": round(rng.uniform(0.4, 1.2), 2), "timed": 30}[kind]
    cmd = f"touch {markers}/{tag}; sleep {seconds}; exit {code}"
    arguments: dict[str, Any] = {"cmd": cmd, "wait_seconds": rng.choice([0, 0.1, 0.5, 3, 5])}
    if rng.random() < 0.3:
        arguments["name"] = rng.choice(SHARED_NAMES)
    elif rng.random() < 0.5:
        arguments["name"] = tag
    if kind == "timed":
        arguments["timeout_secs"] = rng.choice([0.3, 0.8])
        return Run(tag, cmd, arguments, "timed_out", None)
    if rng.random() < 0.3:
        arguments["timeout_secs"] = 20
    return Run(tag, cmd, arguments, "done", code)


async def issue(path: Path, run: Run) -> None:
    """Call `run` on a connection of its own; keep the answer if one comes before the daemon dies."""
    try:
        stream, reader = await open_raw_session(path)
        async with stream:
            await send(stream, run_request(2, **run.arguments))
            run.answer = (await answer(reader, 2))["structuredContent"]
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


async def wait_for_ends(agent: AgentListener, end_ids: set[str]) -> None:
    while not end_ids <= {w.end_id for w in agent.wakes}:
        await agent.wait_for(len(agent.wakes) + 1)


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


async def test_sigkills_at_random_moments_lose_no_task_and_no_end(daemon: DaemonHandle) -> None:
    seed = int(os.environ.get("HIVE_CRASH_SEED") or random.randrange(2**32))
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
                told = {
                    run.tag
                    for run in runs
                    if run.answer is not None and run.answer.get("state") not in (None, "running")
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
                with trio.fail_after(45):
                    await wait_for_ends(agent, owed)
                # The final records: the latest runs' as `list` shows them, the earlier ones' as set aside.
                listed = {t["cmd"]: t for t in structured(await call(session, "list", limit=0))["tasks"]}
                recorded = every_run_on_disk(daemon.state_dir / "bash-tasks")
                final = {**recorded, **listed}

    lost, wrong = [], []
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
            # Recorded, then the daemon died before its process started: it never ran.
            if task["state"] != "interrupted":
                wrong.append((run.tag, task["state"], "interrupted"))
            continue
        if task["state"] != run.expected_state or (
            run.expected_code is not None and task["exit_code"] != run.expected_code
        ):
            wrong.append(
                (run.tag, (task["state"], task["exit_code"]), (run.expected_state, run.expected_code))
            )
        if run.tag in told:
            assert run.answer is not None
            assert (run.answer["state"], run.answer["exit_code"]) == (task["state"], task["exit_code"])
    # Every wake names a run that was: its sender, and its end id that run's own.
    runs_of = {f"{r['id']}:{r['serial']}": r for r in recorded.values()}
    wakes_of: dict[str, list[str]] = defaultdict(list)
    for wake in agent.wakes:
        assert wake.end_id in runs_of, (wake.sender, wake.end_id)
        assert wake.sender == f"bash-task-{runs_of[wake.end_id]['id']}"
        wakes_of[wake.end_id].append(wake.body)
    repeats = len(agent.wakes) - len(wakes_of)
    disk_refusals = sum(1 for r in runs if refused(r) and "space" in json.dumps(r.answer))
    reused = sum(1 for r in final.values() if r["id"] in SHARED_NAMES)
    print(
        f"crash consistency: {ROUNDS} rounds, {len(runs)} runs, {len(final)} tasks "
        f"({reused} under reused names, {sum(refused(r) for r in runs)} refused: {disk_refusals} for want of space), "
        f"{kills + agent.kills} kills ({recovery_kills} during recovery, {agent.kills} on a wake), "
        f"{len(agent.wakes)} wakes, {repeats} repeats, "
        f"{len(told)} ends told inline, {len(owed)} owed, the disk filled {filler.fills} times"
    )
    assert not lost, f"lost tasks (seed {seed}): {lost}"
    assert not wrong, f"wrong final states (seed {seed}): {wrong}"
    assert all(task["state"] not in ("pending", "running") for task in final.values())
