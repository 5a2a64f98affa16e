"""State files, opened one way everywhere: never through a symlink, created 0600, in a 0700 dir.

Tasks and other local users may be able to plant things in a state directory, so nothing
here follows a symlink at the final component (O_NOFOLLOW), nothing opened for reading
blocks on a FIFO (O_NONBLOCK, then regular files only), and every file hive creates is
readable by its own user alone. A record is replaced whole (temp file + rename), and an
append that fails part-way is cut back, so a crash or a full disk never leaves a torn
line behind. Standard library only, synchronous: async callers run the fsyncing calls in
a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from pathlib import Path
from typing import Any

import attrs

from hive.errors import HiveError

log = logging.getLogger(__name__)

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_CREATE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_OR_CREATE = os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class NotARegularFile(HiveError, OSError):
    """Something other than a regular file (a FIFO, a directory, a device) is at a state file's path."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is not a regular file; move it away, hive keeps its own state files there")


class NotADirectory(HiveError, NotADirectoryError):
    """Something other than a directory is where hive keeps a state directory: the path given
    is wrong (exit 2)."""

    exit_code = 2


def path_field(directory: str, name: str) -> Any:
    """An attrs field that is no argument: the path ``name`` in the directory held by the field
    ``directory`` (the state directory of a store)."""
    return attrs.field(
        init=False,
        repr=False,
        default=attrs.Factory(lambda store: getattr(store, directory) / name, takes_self=True),
    )


def ensure_private_dir(path: Path) -> Path:
    """``path`` as a directory: made 0700 (with its parents) when missing, a warning when open to others.

    Each directory made here is durable before this returns (its parent fsynced after it): a
    power cut cannot take it, and every file made durable in it, away.
    """
    try:
        _make_durable_dir(path)
    except FileExistsError:
        pass
    else:
        return path
    mode = os.stat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise NotADirectory(errno.ENOTDIR, f"{path} is not a directory; hive needs it for its state")
    if mode & 0o077:
        log.warning(
            "state dir %s has mode %03o: other users can see what is in it; chmod 700 it",
            path,
            stat.S_IMODE(mode),
        )
    return path


def _make_durable_dir(path: Path, mode: int = PRIVATE_DIR) -> None:
    """mkdir ``path`` and the parents it lacks (those as ``mkdir -p`` makes them), fsyncing
    each one's parent once it is made; FileExistsError if ``path`` is there."""
    try:
        path.mkdir(mode=mode)
    except FileNotFoundError:
        if path.parent == path:
            raise
        with contextlib.suppress(FileExistsError):
            _make_durable_dir(path.parent, 0o777)
        path.mkdir(mode=mode)
    fsync_dir(path.parent)


def _regular(fd: int, path: Path) -> int:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(path)
    return fd


def create_new(path: Path, flags: int = os.O_WRONLY) -> int:
    """Create ``path`` for this process alone: it must not exist, and a symlink there is not followed."""
    return os.open(path, flags | _CREATE, PRIVATE_FILE)


def open_private(path: Path, flags: int) -> int:
    """``path`` opened with ``flags``, created 0600 if missing, never through a symlink, regular only.

    The file is not truncated, and O_NONBLOCK is cleared again once it is known to be regular.
    """
    fd = _regular(os.open(path, flags | _OPEN_OR_CREATE, PRIVATE_FILE), path)
    os.set_blocking(fd, True)
    return fd


def open_lock(path: Path) -> int:
    """A lock file's descriptor (for flock), created 0600; what is in it is left alone."""
    return open_private(path, os.O_RDWR)


def try_lock(path: Path) -> int | None:
    """The descriptor of the lock file at ``path``, held (flock, exclusive) until it is closed;
    None if another process holds it."""
    fd = open_lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_append(path: Path) -> int:
    """``path`` opened for appending, created 0600 when missing."""
    return open_private(path, os.O_WRONLY | os.O_APPEND)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_whole(fd: int, data: bytes) -> None:
    """Append ``data`` to an O_APPEND file whole or not at all.

    A write that fails part-way (ENOSPC, EIO) is cut back to where the file ended, so a
    reader never sees half a line; the error is raised.
    """
    end = os.fstat(fd).st_size
    try:
        write_all(fd, data)
    except OSError:
        try:
            os.ftruncate(fd, end)
        except OSError:
            log.warning("could not cut a failed append back to %d bytes", end, exc_info=True)
        raise


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never a torn one.

    The temporary file is created afresh (a leftover one, or a symlink planted in its place,
    is removed, not followed), and the rename replaces whatever is at ``path`` itself.
    ``durable`` fsyncs the data before the rename (power-loss safety); without it the file
    still survives a crash of this process, from the page cache. On any error the temporary
    file is removed and ``path`` is as it was.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = create_new(tmp)
    except FileExistsError:
        tmp.unlink()
        fd = create_new(tmp)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def open_regular(path: Path) -> int | None:
    """``path`` opened for reading if it is a regular file (not through a symlink); None if it is not there.

    Raises OSError for anything else there: a symlink (ELOOP), a FIFO or a directory.
    """
    try:
        fd = os.open(path, _READ)
    except FileNotFoundError:
        return None
    return _regular(fd, path)


def read_tail(path: Path, limit: int) -> tuple[bytes, int]:
    """The last ``limit`` bytes of a regular file (see :func:`open_regular`) and its size; nothing
    and 0 if it is not there."""
    fd = open_regular(path)
    if fd is None:
        return b"", 0
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)), size
    finally:
        os.close(fd)


def truncate_regular(path: Path, length: int, *, keep_times: bool = False) -> None:
    """Cut a regular file (not through a symlink) down to ``length`` bytes, if it is longer.

    With ``keep_times``, the file keeps the access and modification times it had before the cut.
    A file that is not there is left so; anything else there raises OSError, as `open_regular` does.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    _regular(fd, path)
    try:
        before = os.fstat(fd)
        if before.st_size > length:
            os.ftruncate(fd, length)
            if keep_times:
                os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))
    finally:
        os.close(fd)


def read_regular(path: Path) -> bytes | None:
    """The whole of a regular file (see :func:`open_regular`); None if it is not there."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
