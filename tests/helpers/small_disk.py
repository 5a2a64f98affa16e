"""A small disk for a test: a tmpfs mounted over a directory in a mount namespace of its own, which
the programs a test starts there (``wrapper``) share, and which the test fills and frees from
outside (through the namespace holder's ``/proc/<pid>/root``)."""

from __future__ import annotations

import contextlib
import errno
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs

FILLER = "filler"


def can_mount_tmpfs() -> bool:
    """Whether this machine lets a test mount a tmpfs in a user namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@attrs.frozen
class SmallDisk:
    """A tmpfs of ``size`` over ``path``, seen by the programs started under `wrapper`."""

    path: Path
    holder: subprocess.Popen[bytes]

    @property
    def wrapper(self) -> list[str]:
        """The command line that runs a program in the namespace (it execs the program: same pid)."""
        return ["nsenter", "-t", str(self.holder.pid), "-U", "-m", "--preserve-credentials"]

    def outside(self, path: Path) -> Path:
        """Where the test reaches ``path`` (on the small disk) from outside the namespace."""
        return Path(f"/proc/{self.holder.pid}/root") / path.relative_to("/")

    def fill(self) -> None:
        """Take every byte left on the disk (in a file of the test's)."""
        with open(self.outside(self.path / FILLER), "ab", buffering=0) as filler:
            chunk = b"\0" * 65536
            while True:
                try:
                    filler.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 1:
                        return
                    chunk = chunk[: len(chunk) // 2]

    def free(self) -> None:
        """Give back what `fill` took."""
        self.outside(self.path / FILLER).unlink()


@contextlib.contextmanager
def small_disk(path: Path, size: str = "1m") -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` over ``path`` (made if missing) for the block; it goes with its
    namespace once the holder and every program started in it have ended."""
    path.mkdir(exist_ok=True)
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && echo mounted && exec sleep infinity'
    holder = subprocess.Popen(
        ["unshare", "-rm", "sh", "-c", script, "sh", size, str(path)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline() != b"mounted\n":
            raise RuntimeError(f"could not mount a tmpfs over {path}")
        yield SmallDisk(path, holder)
    finally:
        holder.terminate()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
