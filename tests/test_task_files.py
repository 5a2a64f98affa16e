"""A task's files: never written through a symlink, and kept (moved aside) when a name is reused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import trio

from tests.helpers.daemon import DaemonHandle
from tests.helpers.inotify import wait_until
from tests.helpers.results import call, structured

SUFFIXES = (".json", ".cmd", ".out", ".err", ".exit")


async def test_symlinks_planted_at_the_next_tasks_paths_are_not_followed(
    served: DaemonHandle, short_tmp: Path
) -> None:
    tasks_dir = served.state_dir / "bash-tasks"
    victims = {suffix: short_tmp / f"victim{suffix}" for suffix in (*SUFFIXES, ".tmp")}
    for victim in victims.values():
        victim.write_text("precious\n")
    # A task plants a link at each path of the next task named `next`, and at its record's
    # temporary file.
    links = [f"ln -s {victims[s]} {tasks_dir}/next{s}" for s in SUFFIXES]
    links.append(f"ln -s {victims['.tmp']} {tasks_dir}/.next.json.tmp")
    async with served.session() as session:
        planted = structured(await call(session, "run", cmd="; ".join(links), wait_seconds=20))
        assert (planted["exit_code"], planted["stderr"]["tail"]) == (0, "")
        # The daemon moves the links aside and creates the files afresh: the task runs as usual.
        result = structured(
            await call(
                session, "run", cmd="echo clobbered; echo oops >&2; exit 4", name="next", wait_seconds=0
            )
        )
        ended = structured(await call(session, "status", id=result["id"], wait_seconds=20))
        assert (ended["state"], ended["exit_code"]) == ("done", 4)
        assert ended["stdout"]["tail"] == "clobbered\n"
        assert ended["stderr"]["tail"] == "oops\n"
        # Its final record is saved after the answer that carried its end.
        with trio.fail_after(20):
            await wait_until(lambda: ended_record(tasks_dir / "next.json"), tasks_dir)
    for victim in victims.values():
        assert victim.read_text() == "precious\n", victim
    for suffix in SUFFIXES:
        current = tasks_dir / f"next{suffix}"
        assert current.is_file() and not current.is_symlink(), current
        # The planted link is kept, renamed aside like an earlier run's file.
        assert (tasks_dir / f"next{suffix}.1").is_symlink()
    assert json.loads((tasks_dir / "next.json").read_text())["exit_code"] == 4
    assert (tasks_dir / "next.exit").read_text() == "4\n"
    # The link planted at the record's temporary file was removed, not written through.
    assert not os.path.lexists(tasks_dir / ".next.json.tmp")


def ended_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` once it is its task's final one."""
    record: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    return record if record.get("ended_at") is not None else None


def _read(path: Path) -> str:
    return path.read_text()


async def test_a_reused_name_keeps_the_previous_runs_files(daemon: DaemonHandle) -> None:
    tasks_dir = daemon.state_dir / "bash-tasks"
    first = "echo one; echo e1 >&2; exit 3"
    async with daemon.running(agent=False), daemon.session() as session:
        assert (
            structured(await call(session, "run", cmd=first, name="build", wait_seconds=20))["exit_code"] == 3
        )
        assert (
            structured(await call(session, "run", cmd="echo two", name="build", wait_seconds=20))["exit_code"]
            == 0
        )
        # A name that looks like a generation is a name of its own.
        assert (
            structured(await call(session, "run", cmd="echo other", name="build.1", wait_seconds=20))[
                "exit_code"
            ]
            == 0
        )
        last = structured(await call(session, "run", cmd="echo three", name="build", wait_seconds=20))
        assert last["stdout"]["tail"] == "three\n"
    assert _read(tasks_dir / "build.out") == "three\n"
    # The first run is generation 1, the second generation 2: the highest is the latest earlier run.
    assert (_read(tasks_dir / "build.out.1"), _read(tasks_dir / "build.err.1")) == ("one\n", "e1\n")
    assert (_read(tasks_dir / "build.cmd.1"), _read(tasks_dir / "build.exit.1")) == (first, "3\n")
    old = json.loads(_read(tasks_dir / "build.json.1"))
    assert (old["cmd"], old["state"], old["exit_code"]) == (first, "done", 3)
    assert _read(tasks_dir / "build.out.2") == "two\n"
    assert not (tasks_dir / "build.out.3").exists()
    assert _read(tasks_dir / "build.1.out") == "other\n"
    # A restarted daemon knows each name once, by its latest run.
    async with daemon.running(agent=False), daemon.session() as session:
        listed = structured(await call(session, "list"))
        assert sorted(t["id"] for t in listed["tasks"]) == ["build", "build.1"]
        assert structured(await call(session, "status", id="build"))["stdout"]["tail"] == "three\n"
    assert not any(name.startswith(".") for name in os.listdir(tasks_dir))
