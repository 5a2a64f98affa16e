"""An agent does not outlive the thread that spawned it: ``hive.runtime._lifetime``, through
``setpriv`` (the fast path) and through its ``preexec_fn`` (where there is no ``setpriv``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive.runtime import _lifetime

WAYS = ["setpriv", "preexec_fn"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "setpriv":
        if shutil.which("setpriv") is None:
            pytest.skip("util-linux's setpriv is not installed")
    else:
        monkeypatch.setattr(_lifetime, "_setpriv", lambda: None)
    yield request.param


def test_the_child_gets_sigint_when_the_thread_that_spawned_it_exits(way: str) -> None:
    spawned: list[subprocess.Popen[bytes]] = []

    def spawn() -> None:
        command = ["sh", "-c", "echo ready; exec sleep 60"]
        argv, preexec_fn = _lifetime.following_parent(command, os.environ)
        assert (argv[0].endswith("/setpriv"), preexec_fn is None) == (way == "setpriv",) * 2
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, preexec_fn=preexec_fn)  # noqa: PLW1509
        spawned.append(child)
        # Its command runs, so the prctl is made (setpriv makes it just before its exec): the
        # thread may go.
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"

    thread = threading.Thread(target=spawn)
    thread.start()
    thread.join()
    child = spawned[0]
    try:
        assert child.wait(timeout=30) == -signal.SIGINT
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            child.wait()
        assert child.stdout is not None
        child.stdout.close()


@pytest.mark.parametrize("program", ["hive-no-such-agent", "./hive-no-such-agent", "/nonexistent/agent"])
def test_a_missing_program_is_file_not_found_as_popen_says_it(way: str, program: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    with pytest.raises(FileNotFoundError) as raised:
        argv, preexec_fn = _lifetime.following_parent([program], env, tmp_path)
        subprocess.Popen(argv, env=env, cwd=tmp_path, preexec_fn=preexec_fn)  # noqa: PLW1509
    assert raised.value.filename == program


def test_a_program_that_is_not_executable_is_a_permission_error_as_popen_says_it(
    way: str, tmp_path: Path
) -> None:
    (tmp_path / "agent").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        argv, preexec_fn = _lifetime.following_parent(["./agent"], os.environ, tmp_path)
        subprocess.Popen(argv, cwd=tmp_path, preexec_fn=preexec_fn)  # noqa: PLW1509
