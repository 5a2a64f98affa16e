"""Random bytes on the daemon's socket end at most their own connection; the daemon goes on serving."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.jsonrpc import INITIALIZE, answers_initialize


@pytest.fixture(scope="module")
def daemon_socket() -> Iterator[str]:
    """One daemon for all the examples, started synchronously (outside any Trio run)."""
    root = Path(tempfile.mkdtemp(prefix="hive-fz-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(root / "notify"))
    notify.settimeout(60)
    sock = root / "bash.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "hive.bash.daemon", "--state-dir", str(root / "state"), "--socket", str(sock)],
        env={**os.environ, "NOTIFY_SOCKET": str(root / "notify")},
        stderr=subprocess.DEVNULL,
    )
    try:
        while b"READY=1" not in notify.recv(4096):
            pass
        yield str(sock)
        assert process.poll() is None, "the daemon died"
    finally:
        notify.close()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def send_and_drain(path: str, payload: bytes, half_close: bool) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            else:
                return  # just hang up
            while sock.recv(65536):
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass


lines = st.binary(max_size=512).map(lambda b: b.replace(b"\n", b""))
payloads = st.one_of(
    st.binary(max_size=4096),
    st.lists(lines, max_size=5).map(lambda ls: b"\n".join(ls) + b"\n"),
    st.builds(lambda junk: INITIALIZE + junk, st.binary(max_size=256)),
    st.builds(lambda n: INITIALIZE[:n], st.integers(min_value=0, max_value=len(INITIALIZE))),
)


@settings(max_examples=60, deadline=None)
@given(payload=payloads, half_close=st.booleans())
def test_random_bytes_never_stop_the_daemon(daemon_socket: str, payload: bytes, half_close: bool) -> None:
    send_and_drain(daemon_socket, payload, half_close)
    assert answers_initialize(daemon_socket)
