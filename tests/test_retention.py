"""Retention: what is pruned (a pure choice, checked with hypothesis), how a store lists and
removes runs, and a real daemon pruning a real state directory at its start and periodically."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given

from hive.bash import LooseEnd, StoredRun, TaskRecord, TaskStore
from hive.bash.files._retention import DAY, Candidate, Pruner, Retention, _Known, candidates, choose
from tests.helpers.daemon import DaemonHandle
from tests.helpers.gates import make_gate
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of
from tests.helpers.strategies import listings, retentions
from tests.helpers.tools import serving_tools

# -- the choice ---------------------------------------------------------------------------------

# Small whole numbers, so that ties and the exact age limit come up often.
NOW = 100.0


def age_key(run: Candidate) -> tuple[float, str, int]:
    return (run.ended_at, run.task_id, run.generation)


@given(listings(NOW), retentions(NOW))
def test_choose_keeps_every_protected_run_and_prunes_the_oldest_first(
    runs: list[Candidate], retention: Retention
) -> None:
    chosen = choose(runs, now=NOW, retention=retention)
    assert not any(r.protected for r in chosen)
    assert chosen == sorted(chosen, key=age_key)
    kept = [r for r in runs if not r.protected and r not in chosen]
    if chosen and kept:
        assert max(map(age_key, chosen)) < min(map(age_key, kept))


@given(listings(NOW), retentions(NOW))
def test_choose_brings_the_total_under_the_limit_unless_only_protected_runs_remain(
    runs: list[Candidate], retention: Retention
) -> None:
    chosen = choose(runs, now=NOW, retention=retention)
    left = sum(r.size for r in runs) - sum(r.size for r in chosen)
    if retention.max_bytes is not None and left > retention.max_bytes:
        assert all(r.protected for r in runs if r not in chosen)


@given(listings(NOW), retentions(NOW))
def test_choose_prunes_by_age_every_old_run_and_no_young_one_without_need_of_bytes(
    runs: list[Candidate], retention: Retention
) -> None:
    chosen = choose(runs, now=NOW, retention=retention)
    cutoff = NOW - retention.max_age
    assert all(r in chosen for r in runs if not r.protected and r.ended_at <= cutoff)
    # A younger run goes only when the bytes still held before it were over the limit.
    held = sum(r.size for r in runs)
    for run in chosen:
        if run.ended_at > cutoff:
            assert retention.max_bytes is not None and held > retention.max_bytes
        held -= run.size


def test_candidates_protect_what_cannot_go() -> None:
    stored = [
        StoredRun("known", 0, 10, 5.0),
        StoredRun("known", 1, 10, 1.0),
        StoredRun("stranger", 0, 10, 1.0),  # started as the listing was made
        StoredRun("owed", 0, 10, 1.0),
        StoredRun("owed", 1, 10, 1.0),
        StoredRun("watched", 0, 10, 1.0),
        StoredRun("watched", 2, 10, 1.0),
        StoredRun("busy", 0, 10, 1.0),
    ]
    known = {
        "known": _Known("s1", 3.0, False),
        "owed": _Known("s2", 3.0, False),
        "watched": _Known("s3", 3.0, False),
        "busy": _Known("s4", 3.0, True),
    }
    found = {(c.task_id, c.generation): c for c in candidates(stored, known, {"owed"}, {"watched"})}
    assert {key for key, c in found.items() if c.protected} == {
        ("stranger", 0),
        ("owed", 0),
        ("watched", 0),
        ("watched", 2),
        ("busy", 0),
    }
    # A current run's age is its end; an earlier run's, its newest file.
    assert (found["known", 0].ended_at, found["known", 0].serial) == (3.0, "s1")
    assert (found["known", 1].ended_at, found["known", 1].serial) == (1.0, None)


# -- the store ----------------------------------------------------------------------------------


def make_run(store: TaskStore, task_id: str, serial: str, generation: int = 0, size: int = 3) -> None:
    tail = f".{generation}" if generation else ""
    record = TaskRecord(id=task_id, serial=serial, cmd="true", cwd="/", created_at=1.0)
    store.save_record(record)
    if generation:
        store.record_path(task_id).rename(store.tasks_dir / f"{task_id}.json{tail}")
    for ext in (".cmd", ".out", ".err", ".exit"):
        (store.tasks_dir / f"{task_id}{ext}{tail}").write_bytes(b"x" * size)


def test_the_store_lists_runs_by_id_and_generation(short_tmp: Path) -> None:
    store = TaskStore(short_tmp)
    store.create_dirs()
    make_run(store, "build", "a", generation=1)
    make_run(store, "build", "b")
    make_run(store, "build.1", "c")  # a name with a dot and a digit
    make_run(store, ".x", "d")
    (store.tasks_dir / ".build.json.tmp").write_bytes(b"half")  # a save in progress
    (store.tasks_dir / "stray").write_bytes(b"?")
    os.symlink("/etc/passwd", store.tasks_dir / "planted.out")
    runs = {(r.task_id, r.generation): r for r in store.stored_runs()}
    assert set(runs) == {("build", 1), ("build", 0), ("build.1", 0), (".x", 0), ("planted", 0)}
    record_size = store.record_path("build").stat().st_size
    assert runs["build", 0].size == record_size + 4 * 3
    assert runs["planted", 0].size == len("/etc/passwd")  # the link itself, not its target


def test_the_store_removes_a_run_record_last_and_not_once_the_name_is_reused(short_tmp: Path) -> None:
    store = TaskStore(short_tmp)
    store.create_dirs()
    make_run(store, "build", "old")
    assert store.remove_run_files("build", 0, "old") == 4 * 3
    assert [p.name for p in store.tasks_dir.iterdir()] == ["build.json"]
    assert store.remove_run_record("build", 0, "old") > 0
    assert list(store.tasks_dir.iterdir()) == []
    # A new run took the name: its files stay.
    make_run(store, "build", "new")
    assert store.remove_run_files("build", 0, "old") is None
    assert store.remove_run_record("build", 0, "old") == 0
    assert len(list(store.tasks_dir.iterdir())) == 5
    # An end still owed keeps it too.
    store.save_loose_end(LooseEnd(task_id="build", serial="new", cmd="true", since=1.0))
    assert store.remove_run_files("build", 0, "new") is None
    assert len(list(store.tasks_dir.iterdir())) == 5


# -- a real daemon on a real state directory ----------------------------------------------------


def age_record(daemon: DaemonHandle, task_id: str, days: float) -> None:
    """Make a task look as if it ended ``days`` ago (its record, and the time of its files)."""
    path = daemon.task_file(task_id, ".json")
    record: dict[str, Any] = json.loads(path.read_text())
    then = time.time() - days * DAY
    record["created_at"] = record["started_at"] = then - 1
    record["ended_at"] = then
    path.write_text(json.dumps(record))
    for file in path.parent.glob(f"{task_id}.*"):
        os.utime(file, (then, then), follow_symlinks=False)


def files_of(daemon: DaemonHandle, task_id: str) -> list[str]:
    return sorted(p.name for p in (daemon.state_dir / "bash-tasks").iterdir() if p.name.startswith(task_id))


async def listed_ids(session: Any) -> list[str]:
    return sorted(t["id"] for t in structured(await call(session, "list", limit=0))["tasks"])


async def test_a_daemon_prunes_old_and_excess_tasks_but_never_a_running_or_owed_one(
    daemon: DaemonHandle,
) -> None:
    gate = make_gate(daemon.root)
    async with daemon.running(agent=False), daemon.session() as session:
        for name in ("old", "young", "half"):
            ended = structured(await call(session, "run", cmd=f"echo {name}", name=name, wait_seconds=30))
            assert ended["state"] == "done"
        # A reused name: the first run's files are kept aside as build.*.1.
        for word in ("first", "second"):
            await call(session, "run", cmd=f"echo {word}", name="build", wait_seconds=30)
        # No agent socket, and no answer carrying its end: it stays owed (its loose end waits).
        owed_gate = make_gate(daemon.root, "owed-gate")
        await call(session, "run", cmd=f"read line < {owed_gate}; echo owed", name="owed", wait_seconds=0)
        pid = structured(await call(session, "status", id="owed"))["pid"]
        await trio.to_thread.run_sync(owed_gate.write_text, "go\n", abandon_on_cancel=True)
        await wait_exited(pid)
        running = await call(session, "run", cmd=f"read line < {gate}", name="running", wait_seconds=0)
        assert structured(running)["state"] == "running"
    assert daemon.loose_end("owed").exists()
    for task_id in ("old", "owed"):
        age_record(daemon, task_id, 8)
    for file in daemon.state_dir.glob("bash-tasks/build.*.1"):
        then = time.time() - 8 * DAY
        os.utime(file, (then, then))
    # As a pass that crashed after removing its output leaves it: a record with no files.
    for ext in (".cmd", ".out", ".err", ".exit"):
        daemon.task_file("half", ext).unlink()

    async with daemon.running(agent=False), daemon.session() as session:
        # The first pass is over before the daemon answers.
        assert await listed_ids(session) == ["build", "half", "owed", "running", "young"]
        assert files_of(daemon, "old") == []
        assert files_of(daemon, "build") == [
            f"build{ext}" for ext in (".cmd", ".err", ".exit", ".json", ".out")
        ]
        half = structured(await call(session, "status", id="half"))
        assert (half["state"], half["stdout"]["tail"]) == ("done", "")
        gone = await call(session, "status", id="old")
        assert gone.is_error and "no task has id 'old'" in text_of(gone)

    # Past a limit of 1 byte, everything that may go goes, however young.
    async with daemon.running("--retain-bytes", "1", agent=False), daemon.session() as session:
        assert await listed_ids(session) == ["owed", "running"]
        for task_id in ("young", "half", "build"):
            assert files_of(daemon, task_id) == []
        assert daemon.loose_end("owed").exists()
        assert daemon.task_file("owed", ".out").read_text() == "owed\n"
        await trio.to_thread.run_sync(gate.write_text, "go\n", abandon_on_cancel=True)
        ended = structured(await call(session, "status", id="running", wait_seconds=30))
        assert ended["state"] == "done"


def test_retention_flags_and_their_environment_defaults(
    monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    from hive.bash.daemon import config_from_args

    base = ["--state-dir", str(short_tmp), "--workdir", str(short_tmp)]
    config, _ = config_from_args(base)
    assert (config.retain_days, config.retain_bytes) == (7.0, None)
    monkeypatch.setenv("HIVE_BASH_RETAIN_DAYS", "0.5")
    monkeypatch.setenv("HIVE_BASH_RETAIN_BYTES", "2GiB")
    config, _ = config_from_args(base)
    assert (config.retain_days, config.retain_bytes) == (0.5, 2 * 1024**3)
    config, _ = config_from_args([*base, "--retain-days", "3", "--retain-bytes", "unlimited"])
    assert (config.retain_days, config.retain_bytes) == (3.0, None)
    for bad in (["--retain-days", "-1"], ["--retain-days", "soon"], ["--retain-bytes", "0"]):
        with pytest.raises(SystemExit):
            config_from_args([*base, *bad])


# -- periodic passes, off the event loop ---------------------------------------------------------


class BlockingStore(TaskStore):
    """A store whose listing blocks until ``release`` is set, and says when it has begun."""

    release: threading.Event
    entered: trio.Event
    token: trio.lowlevel.TrioToken

    def stored_runs(self) -> list[StoredRun]:
        if not self.release.is_set():
            trio.from_thread.run_sync(self.entered.set, trio_token=self.token)
            self.release.wait(30)
        return super().stored_runs()


async def test_periodic_passes_prune_an_ended_task_once_told_without_blocking_the_loop(
    short_tmp: Path,
) -> None:
    store = BlockingStore(short_tmp / "state")
    store.release = threading.Event()
    store.entered = trio.Event()
    store.token = trio.lowlevel.current_trio_token()
    async with serving_tools(short_tmp, store=store) as tools, trio.open_nursery() as nursery:
        manager = tools.manager
        pruner = Pruner(manager, Retention(max_age=0, interval=0.01))
        nursery.start_soon(pruner.run)
        try:
            with trio.fail_after(10):
                await store.entered.wait()
            # The pass is stuck in its listing; the loop still answers.
            with trio.fail_after(5):
                ended = await tools.call("run", {"cmd": "echo hi", "name": "t", "wait_seconds": 30})
        finally:
            store.release.set()
        assert ended.structured["state"] == "done"
        # Not yet told: its end is owed, so passes keep it.
        passes = pruner.passes
        with trio.fail_after(10):
            while pruner.passes < passes + 2:
                await pruner.next_pass()
        assert "t" in manager.tasks
        assert ended.delivered is not None
        ended.delivered(True)  # the answer reached a connected client
        with trio.fail_after(10):
            while "t" in manager.tasks:
                await pruner.next_pass()
        assert store.stored_runs() == []
        listed = await tools.call("list", {})
        assert listed.structured["total"] == 0
        nursery.cancel_scope.cancel()
