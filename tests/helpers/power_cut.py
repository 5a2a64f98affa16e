"""A power cut, modelled: what a file system that keeps only what was made durable leaves behind.

fsync(2)'s rule: a file's data is on disk as of its last fsync, and a name in a directory (a
file created, renamed or removed there, a directory made) as of the directory's last fsync.
A program run under this module (``python power_cut.py JOURNAL -m MODULE ARGS...``) keeps a
journal of what each fsync made durable: for a file its whole content, for a directory its
entries, each taken as the fsync is called (what changes during it may or may not be kept), and
written once it has returned, with the order it was taken in. `rebuild` makes from the
journal's first ``n`` entries the directory a power cut there would leave: the entries of each
directory and each file's data as of the latest of its fsyncs that had returned, empty if it
had none. Latest as taken, not as returned: an fsync called while another of the same file or
directory is under way can return first, and what it made durable stays so (the one that
returns later does not undo it).

An inode number freed by a removal can be given to a new file; each file created with O_EXCL
is journalled as born, and a file's data belongs to its number and birth, so that a new file
never gets the data of the one whose number it took.

Standard library only: the journalled program imports it as a script, before anything else.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import runpy
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Identity = tuple[int, int]
"""An inode's number and birth (how many files were created with that number before it)."""


class _Journal:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._lock = threading.Lock()
        self._births: dict[int, int] = {}
        self._taken = 0

    def identity(self, ino: int) -> Identity:
        return ino, self._births.get(ino, 0)

    def born(self, ino: int) -> None:
        with self._lock:
            self._births[ino] = self._births.get(ino, 0) + 1

    def snapshot(self, fd: int) -> dict[str, Any] | None:
        """What an fsync of ``fd`` makes durable, as it is now; None for what is not kept here."""
        info = os.fstat(fd)
        with self._lock:
            self._taken += 1
            taken = self._taken
        if stat.S_ISDIR(info.st_mode):
            entries: dict[str, list[Any]] = {}
            with os.scandir(f"/proc/self/fd/{fd}") as listing:
                for entry in listing:
                    try:
                        child = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    kind = (
                        "d" if stat.S_ISDIR(child.st_mode) else "f" if stat.S_ISREG(child.st_mode) else None
                    )
                    if kind is not None:
                        entries[entry.name] = [*self.identity(child.st_ino), kind]
            return {"dir": self.identity(info.st_ino), "entries": entries, "taken": taken}
        if stat.S_ISREG(info.st_mode):
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                chunks = []
                while chunk := os.read(reader, 1 << 20):
                    chunks.append(chunk)
            finally:
                os.close(reader)
            return {
                "file": self.identity(info.st_ino),
                "data": base64.b64encode(b"".join(chunks)).decode(),
                "taken": taken,
            }
        return None

    def record(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry).encode() + b"\n"
        with self._lock:
            os.write(self._fd, line)


@contextlib.contextmanager
def journalling(path: Path) -> Iterator[None]:
    """Journal this process's fsyncs to ``path`` within the block (for code run in-process)."""
    saved = os.open, os.fsync, os.fdatasync
    install(str(path))
    try:
        yield
    finally:
        os.open, os.fsync, os.fdatasync = saved


def install(path: str) -> None:
    """Journal every fsync and fdatasync this process makes, and every file it creates anew."""
    journal = _Journal(path)
    real_open, real_fsync, real_fdatasync = os.open, os.fsync, os.fdatasync

    def journalled(sync: Any) -> Any:
        def durable(fd: Any) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            entry = journal.snapshot(number)
            sync(number)
            if entry is not None:
                journal.record(entry)

        return durable

    def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if flags & os.O_CREAT and flags & os.O_EXCL:
            journal.born(os.fstat(fd).st_ino)
        return fd

    os.open = open_
    os.fsync = journalled(real_fsync)
    os.fdatasync = journalled(real_fdatasync)


def entries(journal: Path) -> list[dict[str, Any]]:
    """The journal's entries, in the order their fsyncs returned."""
    return [json.loads(line) for line in journal.read_bytes().splitlines()]


def rebuild(journal: list[dict[str, Any]], parent: Path, name: str, into: Path) -> bool:
    """Make at ``into`` what a power cut after ``journal`` (a prefix of the entries) leaves of
    ``parent / name`` (``parent`` itself is taken to be durable); False if nothing is left of it."""
    latest: dict[tuple[str, Identity], dict[str, Any]] = {}
    for entry in journal:
        kind = "dir" if "dir" in entry else "file"
        key = kind, (entry[kind][0], entry[kind][1])
        if key not in latest or latest[key]["taken"] < entry["taken"]:
            latest[key] = entry
    dirs: dict[Identity, dict[str, list[Any]]] = {}
    files: dict[Identity, bytes] = {}
    for (kind, identity), entry in latest.items():
        if kind == "dir":
            dirs[identity] = entry["entries"]
        else:
            files[identity] = base64.b64decode(entry["data"])
    top = dirs.get((os.stat(parent).st_ino, 0), {}).get(name)
    if top is None or top[2] != "d":
        return False

    def make(identity: Identity, path: Path) -> None:
        path.mkdir(mode=0o700)
        for child, (ino, birth, kind) in dirs.get(identity, {}).items():
            if kind == "d":
                make((ino, birth), path / child)
            else:
                (path / child).write_bytes(files.get((ino, birth), b""))
                (path / child).chmod(0o600)

    make((top[0], top[1]), into)
    return True


def journalled_argv(journal: Path) -> list[str]:
    """The wrapper that runs a program (``python -m MODULE ...``) with its fsyncs journalled."""
    return [sys.executable, __file__, str(journal)]


if __name__ == "__main__":
    # power_cut.py JOURNAL PYTHON -m MODULE ARGS...: the program's own interpreter is this one.
    install(sys.argv[1])
    module = sys.argv[4]
    sys.argv = [module, *sys.argv[5:]]
    sys.path[0] = os.getcwd()
    runpy.run_module(module, run_name="__main__", alter_sys=True)
