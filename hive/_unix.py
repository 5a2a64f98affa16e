"""Unix socket listeners for hive's servers: private, never stolen from a live server, gone at a stop.

Two of hive's programs serve a Unix socket at a path someone chose: the bash daemon its MCP
socket (``bash.sock``), the harness its agent socket. :func:`open_unix_listener` is how both
open one. What it does with whatever is already at the path:

=========================================  ============================================
at the path                                 what happens
=========================================  ============================================
nothing                                     the socket is created (0600)
a socket that answers a connect             :class:`SocketInUse`; the other server keeps it
a socket whose connect is refused (stale)   it is replaced
anything else (a file, a directory, ...)    :class:`NotASocket`; it is left as it is
=========================================  ============================================

Whether a socket is live is asked with a Trio connect, so a server that is slow to accept
never blocks the event loop. This module imports nothing of hive but the leaves ``_files`` and
``errors``, so both ``hive.agent_socket`` and ``hive.bash`` may use it.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from hive._files import ensure_private_dir
from hive.errors import BadInput, HiveError, StateBusy

__all__ = [
    "MAX_SOCKET_PATH",
    "ForeignSocket",
    "NotASocket",
    "SocketInUse",
    "SocketPathTooLong",
    "check_socket_path",
    "connect_owned",
    "open_unix_listener",
]

log = logging.getLogger(__name__)

MAX_SOCKET_PATH = 107  # bytes: sun_path is 108, with its terminating NUL
# A live server completes a Unix connect at once (the kernel queues it; accepting is not needed),
# and a full backlog answers EAGAIN at once. This bound is only for a peer that does neither.
PROBE_WITHIN = 5.0
_ATTEMPTS = 3


class SocketInUse(StateBusy, OSError):
    """Another server is listening on the socket path."""


class NotASocket(HiveError, FileExistsError):
    """Something other than a socket is at the socket path: the path given is wrong (exit 2)."""

    exit_code = 2


class ForeignSocket(HiveError, PermissionError):
    """A socket is not its server's own: a symlink, or another user's (see `connect_owned`)."""


class SocketPathTooLong(BadInput):
    """The socket path is longer than a Unix socket's address allows."""


def check_socket_path(path: Path, known_as: str = "path") -> None:
    """Raise SocketPathTooLong (a ValueError) if ``path`` is too long to bind a Unix socket to (``known_as``: see below)."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise SocketPathTooLong(
            f"socket path {path} is {size} bytes long; Unix sockets allow {MAX_SOCKET_PATH}: "
            f"choose a shorter {known_as}"
        )


@asynccontextmanager
async def open_unix_listener(
    path: str | os.PathLike[str], *, backlog: int = 128, known_as: str = "path"
) -> AsyncIterator[trio.SocketListener]:
    """Listen on the Unix socket ``path`` for the duration of the block.

    The socket is 0600 from the moment it exists; a missing directory is created 0700. What
    was at the path before decides whether it is replaced (see the module's table). At the end
    of the block the listener is closed and the path removed, if it is still this socket (the
    same inode): a server that has taken the path over since keeps its socket.

    Raises:
      SocketInUse: another server answers on ``path``.
      NotASocket: ``path`` is something other than a socket.
      SocketPathTooLong: ``path`` is too long for a Unix socket (a ValueError).
      OSError: the socket cannot be created there (permissions, a missing parent, ...).

    ``known_as`` is what the user calls the path, e.g. ``--socket``: each message ends by
    telling them to choose another one.
    """
    path = Path(path)
    check_socket_path(path, known_as)
    ensure_private_dir(path.parent)
    sock, identity = await _bind_afresh(path, known_as)
    try:
        sock.listen(backlog)
        yield trio.SocketListener(sock)
    finally:
        # Compared while the socket is still open: as long as it holds its inode, no other file
        # can have that inode number, so an equal one is this socket, not a successor's.
        _remove_if_ours(path, identity)
        sock.close()


def peer_uid(sock: trio.socket.SocketType) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def uid_allowed(peer: int, own: int) -> bool:
    """Only a server's own user and root may use its socket."""
    return peer in (own, 0)


async def connect_owned(path: Path, owner: int, *, owned_as: str) -> trio.SocketStream:
    """A connection to the socket at ``path`` itself, which must be ``owner``'s and be listened on
    by ``owner`` (or root); else ForeignSocket, and nothing is sent (``owned_as``: what else is
    ``owner``'s, as its messages say it).

    A symlink at ``path`` is refused, not followed: whoever may write its directory could point
    it at another server's socket. The file checked is the one connected to: it is held open
    (``O_PATH``) and connected to through ``/proc/self/fd``, so it cannot be swapped in between.
    A path with nothing there, or no socket, fails as a connect to it does (an OSError).
    """
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if stat.S_ISLNK(found.st_mode):
            raise ForeignSocket(f"{path} is a symlink")
        if found.st_uid != owner:
            raise ForeignSocket(f"{path} belongs to uid {found.st_uid}, {owned_as} to uid {owner}")
        stream = await trio.open_unix_socket(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    peer = peer_uid(stream.socket)
    if not uid_allowed(peer, owner):
        await stream.aclose()
        raise ForeignSocket(f"the server on {path} runs as uid {peer}, {owned_as} belongs to uid {owner}")
    return stream


class _Taken(Exception):
    """The path was bound by someone else between our check and our bind."""


async def _bind_afresh(path: Path, known_as: str) -> tuple[trio.socket.SocketType, _Identity]:
    for _ in range(_ATTEMPTS):
        await _clear_stale(path, known_as)
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            return sock, await _bind(sock, path)
        except _Taken:
            sock.close()  # and check again what is there now
        except BaseException:
            sock.close()
            raise
    raise SocketInUse(
        errno.EADDRINUSE,
        f"{path} is taken again each time this server starts on it: choose another {known_as}",
    )


async def _clear_stale(path: Path, known_as: str) -> None:
    """Remove a stale socket at ``path``; refuse a live one and anything that is not a socket."""
    before = _identity(path)
    if before is None:
        return
    if not before.is_socket:
        raise NotASocket(
            errno.EEXIST,
            f"{path} exists and is not a socket (it is left as it is): move it away, or choose another {known_as}",
        )
    if await _answers(path, known_as):
        raise SocketInUse(
            errno.EADDRINUSE,
            f"another server is listening on {path} (it answered a connect): stop it first, or choose "
            f"another {known_as}",
        )
    # The connect was refused: nobody listens there. Remove that file only, not one that a
    # server starting meanwhile may have put in its place.
    if _identity(path) == before:
        _unlink(path)


async def _answers(path: Path, known_as: str) -> bool:
    """Whether a server listens on the socket at ``path``."""
    with trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            with trio.fail_after(PROBE_WITHIN):
                await probe.connect(os.fspath(path))
        except trio.TooSlowError:
            return True  # it holds the path, even if it is too busy to say so
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError as exc:
            raise type(exc)(
                exc.errno,
                f"cannot tell whether a server listens on {path} ({exc.strerror}): choose another {known_as}",
            ) from None
    return True


async def _bind(sock: trio.socket.SocketType, path: Path) -> _Identity:
    """Bind ``sock`` to ``path`` with mode 0600; the socket file's identity, for the clean-up."""
    # The umask makes the socket 0600 from the moment it exists: no window for another user.
    # It is process-wide, but only ever narrowed here, and restored before anything else can
    # run (binding a Unix address does not yield to the scheduler).
    old_umask = os.umask(0o177)
    try:
        await sock.bind(os.fspath(path))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise _Taken from None
        raise
    finally:
        os.umask(old_umask)
    _chmod(path, 0o600)
    identity = _identity(path)
    if identity is None:
        raise FileNotFoundError(errno.ENOENT, f"{path} vanished as soon as it was bound")
    return identity


@attrs.frozen
class _Identity:
    device: int
    inode: int
    is_socket: bool


def _identity(path: Path) -> _Identity | None:
    """What is at ``path`` itself (a symlink is not followed), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return _Identity(st.st_dev, st.st_ino, stat.S_ISSOCK(st.st_mode))


def _chmod(path: Path, mode: int) -> None:
    os.chmod(path, mode)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def _remove_if_ours(path: Path, identity: _Identity) -> None:
    try:
        if _identity(path) == identity:
            _unlink(path)
    except OSError as exc:
        log.warning("could not remove the socket %s: %s", path, exc.strerror or exc)
