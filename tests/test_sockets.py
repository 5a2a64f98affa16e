"""One lifecycle for every server on a Unix socket (the bare listener, the agent socket, the bash
daemon, the subagent daemon): a stale socket is replaced, a live one is never taken, a path that is
not a socket is refused and left alone, and the socket goes when the server stops."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio

from hive._unix import NotASocket, SocketInUse
from tests.helpers.servers import SERVERS, Server

WITHIN = 30

pytestmark = pytest.mark.parametrize("server", SERVERS, ids=str)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc``, groups unwrapped."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def test_a_stale_socket_is_replaced(server: Server, short_tmp: Path) -> None:
    path = short_tmp / "s.sock"
    left_over = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left_over.bind(os.fspath(path))
    left_over.close()  # a server that was SIGKILLed leaves this: a socket file nobody listens on
    with pytest.raises(ConnectionRefusedError):
        await server.answers(path)
    with trio.fail_after(WITHIN):
        async with server.serve(short_tmp / "state", path):
            assert await server.answers(path)


async def test_a_second_server_on_a_live_socket_is_refused_and_the_first_keeps_serving(
    server: Server, short_tmp: Path
) -> None:
    path = short_tmp / "s.sock"
    with trio.fail_after(WITHIN):
        async with server.serve(short_tmp / "state", path):
            inode = os.lstat(path).st_ino
            with pytest.raises((SocketInUse, BaseExceptionGroup)) as refused:
                async with server.serve(short_tmp / "other-state", path):
                    pytest.fail("a second server opened on a live socket")
            (leaf,) = leaves(refused.value)
            assert isinstance(leaf, SocketInUse), leaf
            assert "another server is listening on" in str(leaf)
            assert str(path) in str(leaf)
            assert str(leaf).endswith(f"stop it first, or choose another {server.known_as}")
            assert os.lstat(path).st_ino == inode
            assert await server.answers(path)


async def test_a_path_that_is_not_a_socket_is_refused_and_left_alone(server: Server, short_tmp: Path) -> None:
    path = short_tmp / "s.sock"
    path.write_text("an operator's file, given as the socket by mistake")
    with trio.fail_after(WITHIN), pytest.raises((NotASocket, BaseExceptionGroup)) as refused:
        async with server.serve(short_tmp / "state", path):
            pytest.fail("a server replaced something that is not a socket")
    (leaf,) = leaves(refused.value)
    assert isinstance(leaf, NotASocket), leaf
    assert f"{path} exists and is not a socket" in str(leaf)
    assert path.read_text() == "an operator's file, given as the socket by mistake"


async def test_the_socket_goes_when_the_server_stops_and_the_next_one_serves_the_path(
    server: Server, short_tmp: Path
) -> None:
    path = short_tmp / "s.sock"
    with trio.fail_after(WITHIN):
        async with server.serve(short_tmp / "state", path):
            assert await server.answers(path)
        # A client now finds no socket (not a refused connect on a dead one).
        assert not os.path.lexists(path)
        with pytest.raises(FileNotFoundError):
            await server.answers(path)
        async with server.serve(short_tmp / "state", path):
            assert await server.answers(path)
        assert not os.path.lexists(path)
