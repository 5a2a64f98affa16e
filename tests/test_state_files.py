"""State files: never opened through a planted symlink, created 0600 in a 0700 dir, and a full
disk cuts no line in two and stops no harness (hive._files and its callers)."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from hive._files import append_whole, ensure_private_dir, open_append, open_lock, try_lock, write_atomic
from hive._state_dir import BadStateDir, StateDirBusy, StateDirUnusable, default_state_dir
from hive._state_dir import lock_state_dir as lock_state_dir_for
from hive.agent import SessionStore, TurnLog, harness, open_queue_file
from hive.agent.harness import lock_state_dir
from hive.bash.daemon import _lock_state_dir
from hive.errors import HiveError, StateBusy
from hive.sink import JsonlFile, JsonlSink, SessionCost

PLANTED = b"someone else's file\n"


def _open_queue(path: Path) -> None:
    queue, _ = trio.run(open_queue_file, path)
    queue.close()


def _save_session(path: Path) -> None:
    SessionStore(path, "claude").save("s-1", SessionCost("s-1", 0.25))


def _close(fd: int) -> None:
    os.close(fd)


OPENERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "bash-daemon.lock": ("bash-daemon.lock", lambda p: _lock_state_dir(p.parent).close()),
    "agent.lock": ("agent.lock", lambda p: lock_state_dir(p.parent).close()),
    "queue": ("queue", _open_queue),
    "turns.jsonl": ("turns.jsonl", lambda p: _close(open_append(p))),
    "turn log": ("turns.jsonl", lambda p: trio.run(TurnLog.open(p).aclose)),
    "jsonl sink": ("out.jsonl", lambda p: trio.run(JsonlSink.to_path(p).aclose)),
}


@pytest.mark.parametrize("name", sorted(OPENERS))
def test_a_symlink_planted_at_a_state_file_is_not_followed(tmp_path: Path, name: str) -> None:
    filename, opener = OPENERS[name]
    target = tmp_path / "target"
    target.write_bytes(PLANTED)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / filename).symlink_to(target)
    with pytest.raises(OSError):
        opener(state / filename)
    assert target.read_bytes() == PLANTED


def test_a_session_saved_over_a_planted_symlink_replaces_the_link_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(PLANTED)
    (tmp_path / "session").symlink_to(target)
    (tmp_path / ".session.tmp").symlink_to(target)
    _save_session(tmp_path / "session")
    assert target.read_bytes() == PLANTED
    assert not (tmp_path / "session").is_symlink()
    saved = SessionStore(tmp_path / "session", "claude")
    assert saved.load() == "s-1"
    assert saved.cost == SessionCost("s-1", 0.25)


def test_a_fifo_planted_at_a_state_file_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "agent.lock")
    with pytest.raises(OSError, match="not a regular file"):
        open_lock(tmp_path / "agent.lock")


@pytest.mark.parametrize("name", sorted(OPENERS))
def test_every_state_file_is_created_for_its_user_alone(tmp_path: Path, name: str) -> None:
    filename, opener = OPENERS[name]
    os.umask(0o022)
    opener(tmp_path / filename)
    assert stat.S_IMODE(os.stat(tmp_path / filename).st_mode) == 0o600


def test_a_lock_file_keeps_what_is_in_it_and_is_held_once(tmp_path: Path) -> None:
    path = tmp_path / "bash-daemon.lock"
    path.write_bytes(b"kept")
    first = try_lock(path)
    assert first is not None
    try:
        assert try_lock(path) is None
    finally:
        os.close(first)
    assert path.read_bytes() == b"kept"


def test_a_state_dir_hive_makes_is_0700_and_an_open_one_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    os.umask(0o022)
    made = tmp_path / "made" / "state"
    lock_state_dir(made).close()
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    assert not caplog.records

    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    with caplog.at_level(logging.WARNING, logger="hive._files"):
        ensure_private_dir(open_dir)
    assert any("chmod 700" in r.getMessage() and str(open_dir) in r.getMessage() for r in caplog.records)
    assert stat.S_IMODE(os.stat(open_dir).st_mode) == 0o755  # hive says so; it does not change it


def _over_a_size_limit(body: str) -> str:
    """Run ``body`` in a Python whose file-size limit is 100 bytes: a full disk that arrives in the
    middle of a write, for that process alone. It prints the errno it got."""
    script = f"""
import os, resource, signal
from pathlib import Path
from hive._state_dir import StateDirBusy, StateDirUnusable, default_state_dir
from hive._state_dir import lock_state_dir as lock_state_dir_for
from hive.errors import HiveError, StateBusy
from hive._files import append_whole, open_append, write_atomic
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
try:
{textwrap.indent(textwrap.dedent(body), "    ")}
except OSError as exc:
    print(exc.errno)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip() or done.stderr


def test_an_append_that_fails_part_way_is_cut_back_to_the_last_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    got = _over_a_size_limit(f"""
        fd = open_append(Path({str(path)!r}))
        append_whole(fd, b"first line\\n")
        append_whole(fd, b"x" * 300 + b"\\n")
    """)
    assert got == str(errno.EFBIG)
    assert path.read_bytes() == b"first line\n"


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record"
    write_atomic(path, b"old")
    got = _over_a_size_limit(f"write_atomic(Path({str(path)!r}), b'n' * 300)")
    assert got == str(errno.EFBIG)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record"]


async def test_a_turn_log_on_a_full_disk_is_reported_once_and_the_turns_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "turns.jsonl"
    full = TurnLog(
        path, JsonlFile(path, os.open("/dev/full", os.O_WRONLY | os.O_CLOEXEC), known_as="the turn log")
    )
    with caplog.at_level(logging.ERROR, logger="hive.sink._sink"):
        for _ in range(3):
            await full.write(b'{"type":"assistant"}\n')
    await full.aclose()
    reports = [r for r in caplog.records if "cannot write the turn log" in r.getMessage()]
    assert len(reports) == 1
    assert str(path) in reports[0].getMessage()


def test_append_whole_writes_everything_it_is_given(tmp_path: Path) -> None:
    fd = open_append(tmp_path / "log")
    try:
        for n in range(3):
            append_whole(fd, bytes([65 + n]) * 100_000)
    finally:
        os.close(fd)
    data = (tmp_path / "log").read_bytes()
    assert data == b"A" * 100_000 + b"B" * 100_000 + b"C" * 100_000


# -- the state directory: its default and its lock (hive._state_dir) ---------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"HIVE_STATE_DIR": "/s", "XDG_STATE_HOME": "/x"}, Path("/s")),
        ({"HIVE_STATE_DIR": "", "XDG_STATE_HOME": "/x"}, Path("/x/hive")),
        ({"XDG_STATE_HOME": "/x"}, Path("/x/hive")),
        ({"XDG_STATE_HOME": ""}, Path.home() / ".local" / "state" / "hive"),
        ({}, Path.home() / ".local" / "state" / "hive"),
    ],
)
def test_the_default_state_dir_is_hive_state_dir_then_xdg_then_home(
    env: dict[str, str], expected: Path
) -> None:
    assert default_state_dir(env) == expected


def test_a_state_dir_lock_holds_its_pid_and_refuses_a_second_holder_naming_the_first(tmp_path: Path) -> None:
    lock = lock_state_dir_for(tmp_path, "x.lock", holder="hive-thing")
    try:
        assert (tmp_path / "x.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(StateDirBusy) as refused:
            lock_state_dir_for(tmp_path, "x.lock", holder="hive-thing", advice="use that one")
        assert str(refused.value) == (
            f"another hive-thing is using {tmp_path} (pid {os.getpid()} holds {tmp_path / 'x.lock'}); use that one"
        )
        assert isinstance(refused.value, StateBusy) and refused.value.exit_code == 2
        assert refused.value.pid == os.getpid()
        assert (tmp_path / "x.lock").read_text() == f"{os.getpid()}\n"  # the refused one wiped nothing
    finally:
        lock.close()
    assert (tmp_path / "x.lock").read_bytes() == b""  # no pid left for anyone to signal
    lock.close()  # twice: nothing
    with lock_state_dir_for(tmp_path, "x.lock", holder="hive-thing"):
        pass


def test_a_busy_lock_without_a_pid_in_it_is_refused_all_the_same(tmp_path: Path) -> None:
    held = try_lock(tmp_path / "x.lock")
    assert held is not None
    try:
        with pytest.raises(
            StateDirBusy, match=r"another hive-thing is using .* \(it holds .*x\.lock\); stop it"
        ):
            lock_state_dir_for(tmp_path, "x.lock", holder="hive-thing")
    finally:
        os.close(held)


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("file", "cannot be used: it, or a directory above it, is not a directory"),
        ("file/state", "cannot be used: it, or a directory above it, is not a directory"),
        ("/proc/hive", "cannot be made: No such file or directory"),
    ],
)
@pytest.mark.parametrize(
    ("holder", "lock"),
    [
        ("hive-agent", lock_state_dir),
        ("hive-bash-daemon", _lock_state_dir),
        ("subagent daemon", lambda path: lock_state_dir_for(path, "x.lock", holder="subagent daemon")),
    ],
)
def test_a_state_dir_that_is_no_directory_or_cannot_be_made_is_bad_input_saying_what_to_do(
    tmp_path: Path, where: str, says: str, holder: str, lock: Callable[[Path], object]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    state = tmp_path / where
    with pytest.raises(BadStateDir) as refused:
        lock(state)
    assert str(refused.value) == (
        f"the state directory {state} {says}; give {holder} --state-dir (or HIVE_STATE_DIR) a "
        "directory it can make or use"
    )
    assert refused.value.exit_code == 2


def test_hive_agent_with_a_file_for_its_state_dir_exits_2_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("HIVE_RUNTIME", "claude")
    monkeypatch.setenv("HIVE_CLAUDE_COMMAND", "/bin/true")  # an agent that is there: the state dir is next
    assert harness.main(["--state-dir", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"hive-agent: the state directory {tmp_path / 'file'} cannot be used: it, or a directory above "
        "it, is not a directory; give hive-agent --state-dir (or HIVE_STATE_DIR) a directory it can make "
        "or use"
    ]


def plant(planted: str, path: Path, target: Path) -> None:
    """At ``path``, where a file is wanted: a symlink to ``target`` (`PLANTED` written there), a
    fifo or a directory."""
    if planted == "symlink":
        target.write_bytes(PLANTED)
        path.symlink_to(target)
    elif planted == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


@pytest.mark.parametrize("planted", ["symlink", "fifo", "directory"])
def test_a_lock_that_cannot_be_opened_is_state_dir_unusable(tmp_path: Path, planted: str) -> None:
    path = tmp_path / "x.lock"
    plant(planted, path, tmp_path / "target")
    with pytest.raises(StateDirUnusable, match="move whatever is there away") as refused:
        lock_state_dir_for(tmp_path, "x.lock", holder="hive-thing")
    assert isinstance(refused.value, OSError) and isinstance(refused.value, HiveError)
    assert str(path) in str(refused.value)
    if planted == "symlink":
        assert (tmp_path / "target").read_bytes() == PLANTED


def test_each_program_names_itself_when_its_state_dir_is_busy(tmp_path: Path) -> None:
    with lock_state_dir(tmp_path), pytest.raises(StateDirBusy, match=r"^another hive-agent is using"):
        lock_state_dir(tmp_path)
    with _lock_state_dir(tmp_path), pytest.raises(StateDirBusy, match=r"^another hive-bash-daemon is using"):
        _lock_state_dir(tmp_path)


@pytest.mark.parametrize("planted", ["symlink", "fifo", "directory"])
def test_hive_agent_given_a_queue_it_cannot_read_says_so_in_one_line(tmp_path: Path, planted: str) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    queue = state / "queue"
    plant(planted, queue, tmp_path / "target")
    env = {**os.environ, "HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": "/bin/true"}
    ended = subprocess.run(
        [sys.executable, "-m", "hive.agent.harness", "--state-dir", str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 1, ended.stderr
    # The failure in one line, after the log's (`starting`, said before the queue is read).
    (line,) = [said for said in ended.stderr.splitlines() if not said.startswith("hive-agent: INFO: ")]
    assert line.startswith(f"hive-agent: cannot read the queue {queue}: ")
    assert line.endswith("; move it away to start empty")
