"""The benchmarks' own daemon helper: the flags a benchmark gives reach hive-bash-daemon."""

from __future__ import annotations

from pathlib import Path

from bench._common import running_daemon


def test_running_daemon_passes_its_extra_arguments_to_the_daemon(short_tmp: Path) -> None:
    with running_daemon(short_tmp, "--max-running", "3", "--no-cgroups") as daemon:
        argv = Path(f"/proc/{daemon.pid}/cmdline").read_bytes().split(b"\0")
    assert argv[-4:-1] == [b"--max-running", b"3", b"--no-cgroups"]
