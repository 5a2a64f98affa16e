"""bench/fleet_soak.py's rounds: a round that passed leaves nothing behind; a failed one's files
stay where it says, the small disk's with them."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import fleet_soak
from tests.scenario.checks import Counts
from tests.scenario.fleet import Fleet, small_disk, unmount

COUNTS = Counts(
    tasks=1,
    ends_lost=0,
    ends_twice=0,
    end_times_wrong=0,
    messages=1,
    messages_lost=0,
    messages_twice=0,
    turns=1,
)


def _round(monkeypatch: pytest.MonkeyPatch, problems: list[str] | Exception) -> Path:
    """A round of `soak_round` whose fleet leaves one file in its root and whose check finds
    ``problems`` (or whose run raises it); the round's root."""
    roots: list[Path] = []

    async def run_fleet(seed: int, root: Path, *, seconds: float) -> Fleet:
        roots.append(root)
        (root / "turns.jsonl").write_text("{}\n")
        if isinstance(problems, Exception):
            raise problems
        return Fleet(seed, root, [], "tag")

    def verify(fleet: Fleet) -> tuple[Counts, list[str]]:
        assert not isinstance(problems, Exception)
        return COUNTS, problems

    monkeypatch.setattr(fleet_soak, "run_fleet", run_fleet)
    monkeypatch.setattr(fleet_soak, "verify", verify)
    fleet_soak.soak_round(7, 1.0)
    (root,) = roots
    return root


def test_a_round_that_passed_is_removed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _round(monkeypatch, [])
    assert not root.exists()
    assert "kept" not in capsys.readouterr().out


@pytest.mark.parametrize("failure", [["messages: 1 lost"], RuntimeError("the fleet did not settle")])
def test_a_failed_round_keeps_its_files_and_says_where(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], failure: Any
) -> None:
    root = _round(monkeypatch, failure)
    try:
        assert (root / "turns.jsonl").read_text() == "{}\n"
        assert f"seed 7: the round's files are kept in {root}" in capsys.readouterr().out
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)


def test_a_kept_small_disk_leaves_its_files_where_it_was_mounted(short_tmp: Path) -> None:
    state = short_tmp / "agents" / "a"
    disk = small_disk(state)
    if disk is None:
        pytest.skip("needs root to mount a tmpfs")
    (disk / "turns.jsonl").write_text("{}\n")
    (disk / "filler").write_bytes(b"\0" * 4096)
    (disk / "bash-tasks").mkdir()
    (disk / "bash-tasks" / "t.json").write_text("{}")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(os.fspath(disk / "agent.sock"))
        unmount(Fleet(1, short_tmp, [], "tag", small_disk=disk), keep=True)
    assert not os.path.ismount(state)
    assert sorted(p.name for p in state.rglob("*")) == ["bash-tasks", "t.json", "turns.jsonl"]
    assert (state / "turns.jsonl").read_text() == "{}\n"
