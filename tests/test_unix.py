"""hive._unix.open_unix_listener: what it does with whatever is at the path, and what it leaves behind."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest
import trio

from hive._unix import MAX_SOCKET_PATH, NotASocket, SocketInUse, open_unix_listener

WITHIN = 10


def stale_socket(path: Path) -> None:
    """A socket file whose server is gone: bound, then closed without being removed."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.fspath(path))
    sock.close()


async def answers(path: Path) -> bool:
    """Whether a connect to ``path`` is accepted by a listener in this process."""
    try:
        stream = await trio.open_unix_socket(os.fspath(path))
    except OSError:
        return False
    await stream.aclose()
    return True


async def serves(listener: trio.SocketListener, path: Path) -> None:
    """A client connects to ``path`` and ``listener`` accepts it (after any probes queued before it)."""
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        await stream.send_all(b"x")
        while True:
            async with await listener.accept() as accepted:
                if await accepted.receive_some(1) == b"x":
                    return


async def test_the_socket_is_private_and_so_is_a_directory_made_for_it(short_tmp: Path) -> None:
    path = short_tmp / "new" / "s.sock"
    with trio.fail_after(WITHIN):
        async with open_unix_listener(path) as listener:
            assert stat.S_ISSOCK(os.lstat(path).st_mode)
            assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            await serves(listener, path)


async def test_the_socket_is_removed_at_the_end_of_the_block(short_tmp: Path) -> None:
    path = short_tmp / "s.sock"
    with trio.fail_after(WITHIN):
        async with open_unix_listener(path):
            assert path.exists()
        assert not os.path.lexists(path)
        # ... also when the block ends in an error, and the next listener opens cleanly.
        with pytest.raises(RuntimeError, match="boom"):
            async with open_unix_listener(path):
                raise RuntimeError("boom")
        assert not os.path.lexists(path)
        async with open_unix_listener(path) as listener:
            await serves(listener, path)


async def test_a_socket_taken_over_meanwhile_is_left_to_its_new_owner(short_tmp: Path) -> None:
    path = short_tmp / "s.sock"
    with trio.fail_after(WITHIN):
        async with open_unix_listener(path):
            # Someone removed our socket and put theirs in its place (same path, another inode).
            path.unlink()
            theirs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            theirs.bind(os.fspath(path))
            theirs.listen(1)
            their_inode = os.lstat(path).st_ino
        with theirs:
            assert os.lstat(path).st_ino == their_inode
            assert await answers(path)


@pytest.mark.parametrize("kind", ["file", "directory", "symlink-to-a-socket", "fifo"])
async def test_a_path_that_is_not_a_socket_is_refused_and_left_alone(short_tmp: Path, kind: str) -> None:
    path = short_tmp / "s.sock"
    if kind == "file":
        path.write_text("someone's notes")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        stale_socket(short_tmp / "real.sock")
        path.symlink_to(short_tmp / "real.sock")
    before = os.lstat(path)
    with trio.fail_after(WITHIN), pytest.raises(NotASocket) as refused:
        async with open_unix_listener(path):
            pytest.fail("a listener replaced something that is not a socket")
    assert "is not a socket" in str(refused.value)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    if kind == "file":
        assert path.read_text() == "someone's notes"


async def test_a_path_too_long_for_a_socket_is_refused_saying_so(short_tmp: Path) -> None:
    path = short_tmp / ("x" * (MAX_SOCKET_PATH - len(os.fsencode(short_tmp))))
    with pytest.raises(ValueError, match=f"Unix sockets allow {MAX_SOCKET_PATH}: choose a shorter --where"):
        async with open_unix_listener(path, known_as="--where"):
            pytest.fail("bound a path longer than a Unix socket allows")


async def test_a_live_server_that_is_not_accepting_is_refused_without_blocking(short_tmp: Path) -> None:
    """A live server whose backlog is full: the probe must not block the event loop on connect."""
    path = short_tmp / "s.sock"
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    busy.bind(os.fspath(path))
    busy.listen(0)
    queued = []
    for _ in range(8):  # fill its backlog: the next connect would wait for an accept that never comes
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.setblocking(False)
        queued.append(client)
        try:
            client.connect(os.fspath(path))
        except BlockingIOError:
            break
    else:
        pytest.fail("could not fill the listener's backlog")
    # A blocking probe would hang this test past any Trio deadline; closing the busy listener
    # from a thread after a while frees such a probe, so that the test fails instead.
    guard = threading.Timer(WITHIN, busy.close)
    guard.start()
    try:
        with trio.fail_after(WITHIN), pytest.raises(SocketInUse):
            async with open_unix_listener(path):
                pytest.fail("a listener replaced a live (busy) socket")
        assert guard.is_alive(), "the probe blocked until the guard closed the listener"
    finally:
        guard.cancel()
        busy.close()
        for client in queued:
            client.close()
