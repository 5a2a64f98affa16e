"""A child started with a death signal does not outlive the thread that spawned it:
``hive._spawn.start``, through hive._clone3 and through the fallback (``subprocess`` with a
``preexec_fn``, where the extension is not built)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive import _spawn
from tests.helpers.spawning import clone3_usable, without_clone3

WAYS = ["clone3", "fallback"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "clone3" and not clone3_usable():
        pytest.skip("hive._clone3 is not built here, or the kernel has no clone3")
    with without_clone3() if request.param == "fallback" else contextlib.nullcontext():
        yield request.param


def test_the_child_gets_sigint_when_the_thread_that_spawned_it_exits(way: str) -> None:
    spawned: list[_spawn.Process] = []
    read, write = os.pipe()

    def spawn() -> None:
        child = _spawn.start(
            ["sh", "-c", "echo ready; exec sleep 60"],
            env=os.environ,
            stdio=(-1, write, -1),
            death_signal=signal.SIGINT,
        )
        assert isinstance(child, _spawn.Started) == (way == "clone3")
        spawned.append(child)
        # Its command runs, so the prctl is made: the thread may go.
        assert os.read(read, 6) == b"ready\n"

    try:
        thread = threading.Thread(target=spawn)
        thread.start()
        thread.join()
    finally:
        os.close(write)
    child = spawned[0]
    try:
        assert child.wait() == -signal.SIGINT
    finally:
        os.close(read)
        if isinstance(child, _spawn.Started):
            os.close(child.pidfd)


@pytest.mark.parametrize("program", ["hive-no-such-agent", "./hive-no-such-agent", "/nonexistent/agent"])
def test_a_missing_program_is_file_not_found_as_popen_says_it(way: str, program: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    with pytest.raises(FileNotFoundError) as raised:
        _spawn.start([program], env=env, cwd=tmp_path, death_signal=signal.SIGINT)
    assert raised.value.filename == program


def test_a_program_that_is_not_executable_is_a_permission_error_as_popen_says_it(
    way: str, tmp_path: Path
) -> None:
    (tmp_path / "agent").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        _spawn.start(["./agent"], env=os.environ, cwd=tmp_path, death_signal=signal.SIGINT)
