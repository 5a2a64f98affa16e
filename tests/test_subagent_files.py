"""The subagent daemon's state files: opened as ``hive._files`` opens them (no symlink followed,
created 0600 in a 0700 dir), and a disk that fails (ENOSPC, EIO) reported once, nothing lost, the
daemon still up."""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

import attrs
import pytest
import trio

from hive._state_dir import StateDirUnusable
from hive.subagent import daemon
from hive.subagent._convert import DecodeError
from hive.subagent._session_records import SessionRecord
from hive.subagent._start import CannotStart, open_log
from hive.subagent._store import Store
from tests.helpers.subagents import (
    INTERRUPTED_IN_BASH,
    Courier,
    World,
    serving,
    tool_use_seen,
    turn_done,
    wait_until,
)

TURN = 60


def planted(path: Path, target: Path) -> Path:
    """A symlink at ``path`` to ``target``, which holds something that must stay."""
    target.write_bytes(b"precious\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return target


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_symlink_planted_at_the_lock_is_not_followed(short_tmp: Path) -> None:
    store = Store(short_tmp / "state")
    target = planted(store.lock, short_tmp / "target")
    with pytest.raises(StateDirUnusable, match="move whatever is there away"):
        daemon._lock(store)
    assert target.read_bytes() == b"precious\n"


def test_the_lock_is_created_0600_and_holds_the_pid(short_tmp: Path) -> None:
    store = Store(short_tmp / "state")
    store.create_dirs()
    lock = daemon._lock(store)
    try:
        assert mode(store.lock) == 0o600
        assert store.lock.read_text() == f"{os.getpid()}\n"
    finally:
        lock.close()
    assert mode(store.state_dir) == 0o700 and mode(store.sessions) == 0o700


def test_the_daemon_log_is_created_0600_in_a_0700_state_dir(short_tmp: Path) -> None:
    state = short_tmp / "fresh" / "state"
    path, log = open_log(str(state))
    with log:
        log.write(b"a line\n")
    assert mode(path) == 0o600 and mode(state) == 0o700
    assert Path(path).read_bytes() == b"a line\n"


def test_a_symlink_planted_at_the_daemon_log_is_not_followed(short_tmp: Path) -> None:
    state = short_tmp / "state"
    target = planted(state / "subagent-daemon.log", short_tmp / "target")
    with pytest.raises(CannotStart, match="cannot open its log"):
        open_log(str(state))
    assert target.read_bytes() == b"precious\n"


def test_a_record_behind_a_planted_symlink_is_neither_read_nor_written_through(short_tmp: Path) -> None:
    store = Store(short_tmp / "state")
    store.create_dirs()
    elsewhere = Store(short_tmp / "elsewhere")
    elsewhere.create_dirs()
    elsewhere.save(SessionRecord(name="w", backend="claude", created_at=1.0))
    store.record_path("w").symlink_to(elsewhere.record_path("w"))
    with pytest.raises(DecodeError, match="cannot read the record"):
        store.load("w")
    tmp_target = planted(store.sessions / ".w.json.tmp", short_tmp / "tmp-target")
    store.save(SessionRecord(name="w", backend="acp", created_at=2.0))
    assert tmp_target.read_bytes() == b"precious\n"
    assert elsewhere.load("w") == SessionRecord(name="w", backend="claude", created_at=1.0)
    assert not store.record_path("w").is_symlink() and mode(store.record_path("w")) == 0o600
    assert store.load("w") == SessionRecord(name="w", backend="acp", created_at=2.0)


@attrs.define(eq=False)
class Disk:
    full: bool = False


@attrs.frozen
class FullableStore(Store):
    """A store whose disk the test fills and frees: each save then fails as on a full disk."""

    disk: Disk = attrs.field(factory=Disk)

    def save(self, record: SessionRecord) -> None:
        if self.disk.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().save(record)


async def test_a_full_disk_is_reported_once_loses_no_end_and_the_daemon_goes_on(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.claude.script(INTERRUPTED_IN_BASH)
    disk = Disk()
    store = FullableStore(world.state, disk)
    courier = Courier()
    caplog.set_level(logging.INFO, logger="hive.subagent")
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            manager.store = store
            manager.start("w", "run the tool", world.caller())
            await wait_until(world, lambda: tool_use_seen(world, "w"))
            disk.full = True
            assert manager.interrupt("w").sent == "SIGINT"  # its save fails: the interrupt does not
            await courier.arrived.wait()  # the end is told all the same
            assert Store(world.state).load("w").last is None  # type: ignore[union-attr]
            disk.full = False
            world.claude.script("default")
            manager.start("v", "hi", world.caller())  # the next save that works writes w's too
            await turn_done(manager, "v")
            assert manager.records["v"].last
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "cannot save subagent records" in errors[0].getMessage()
    assert "free space" in errors[0].getMessage()
    on_disk = Store(world.state).load("w")
    assert on_disk is not None and on_disk.last is not None
    assert on_disk.last.stop_reason == "interrupted" and on_disk.current is None
    assert courier.sent[0][0].startswith("w:")
    assert not list(world.state.joinpath("subagents").glob(".*.tmp"))


async def test_a_symlink_planted_at_a_turn_log_fails_the_turn_and_leaves_its_target(world: World) -> None:
    world.claude.script("default")
    target = planted(world.store.log_path("w"), world.root / "target")
    courier = Courier()
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            manager.start("w", "hi", world.caller())
            await courier.arrived.wait()
    last = manager.records["w"].last
    assert last is not None and last.stop_reason == "failed"
    assert "cannot open the turn log" in " ".join(last.errors)
    assert target.read_bytes() == b"precious\n"
