"""4. One task writing 214 MB to stdout (``seq 1 25000000``), and whether the daemon notices the size.

Wall time from ``run(wait_seconds=0)`` through ``status(id, wait_seconds=30)`` (repeated until the
task is final) to the final answer. Floor: the same ``seq 1 25000000 > file`` from a shell, into
the same directory tree. The daemon's CPU time (utime+stime) and peak RSS (VmHWM) are read around
each task; a small task (``seq 1 1000``) gives the comparison. Rounds alternate with the floor.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from _common import Daemon, Figure, Relay, check_done, main, running_daemon, scratch, summary

BIG = "seq 1 25000000"
BIG_BYTES = 213_888_897
SMALL = "seq 1 1000"
ROUNDS = 3


def through_daemon(relay: Relay, daemon: Daemon, cmd: str) -> dict[str, float]:
    cpu, rss = daemon.cpu(), daemon.peak_rss_mb()
    started = time.perf_counter()
    # Every field (full): the output's path and size are in an agent's answer only when cut.
    _, result = relay.call("run", cmd=cmd, wait_seconds=0, full=True)
    while result["state"] not in ("done", "timed_out", "stopped", "interrupted"):
        _, result = relay.call("status", id=result["id"], wait_seconds=30, full=True)
    wall = time.perf_counter() - started
    check_done(result)
    Path(result["stdout"]["path"]).unlink()
    return {
        "wall_s": wall,
        "stdout_bytes": result["stdout"]["bytes"],
        "daemon_cpu_s": daemon.cpu() - cpu,
        "peak_rss_mb_before": rss,
        "peak_rss_mb_after": daemon.peak_rss_mb(),
    }


def shell_to_file(root: Path, cmd: str) -> float:
    target = root / "floor.out"
    started = time.perf_counter()
    subprocess.run(["sh", "-c", f"{cmd} > {target}"], check=True)
    took = time.perf_counter() - started
    target.unlink()
    return took


def run() -> list[Figure]:
    big, small, floor = [], [], []
    with scratch() as root, running_daemon(root) as daemon, Relay(daemon.socket, root / "relay.err") as relay:
        relay.handshake()
        for _ in range(5):
            check_done(relay.call("run", cmd="true", wait_seconds=30)[1])
        for _ in range(ROUNDS):
            small.append(through_daemon(relay, daemon, SMALL))
            floor.append(shell_to_file(root, BIG))
            big.append(through_daemon(relay, daemon, BIG))
    if any(b["stdout_bytes"] != BIG_BYTES for b in big):
        raise RuntimeError(f"expected {BIG_BYTES} bytes of stdout, got {[b['stdout_bytes'] for b in big]}")
    wall, f = summary(b["wall_s"] for b in big), summary(floor)
    big_cpu = summary(b["daemon_cpu_s"] for b in big)["median"]
    small_cpu = summary(s["daemon_cpu_s"] for s in small)["median"]
    rss_growth = max(b["peak_rss_mb_after"] - b["peak_rss_mb_before"] for b in big)
    return [
        Figure(
            "4 214 MB stdout",
            f"run({BIG}, wait 0) + status(wait 30) until done (median of {ROUNDS})",
            wall["median"],
            "s",
            f["median"],
            f"sh -c '{BIG} > file'",
            "<= 1.2x",
            {"big": big, "small": small, "floor_s": floor},
        ),
        Figure(
            "4 214 MB stdout",
            f"daemon CPU time for the 214 MB task (median); for `{SMALL}`: {small_cpu * 1000:.0f} ms",
            big_cpu * 1000,
            "ms",
            extra={"big_s": [b["daemon_cpu_s"] for b in big], "small_s": [s["daemon_cpu_s"] for s in small]},
        ),
        Figure(
            "4 214 MB stdout",
            f"daemon peak RSS (VmHWM) after the 214 MB tasks; largest rise during one: {rss_growth:.1f} MB",
            big[-1]["peak_rss_mb_after"],
            "MB",
            extra={"peak_rss_mb_before_first": big[0]["peak_rss_mb_before"]},
        ),
    ]


if __name__ == "__main__":
    main(run)
