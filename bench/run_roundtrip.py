"""2. One ``run(cmd="true", wait_seconds=30)`` through the relay, answered inline once ``true`` ends.

Floor: spawning ``sh -c true`` directly and waiting for it (``subprocess.run``). Peers in the same
run: the `mcp` SDK's own server on Trio (``sdk_floor_server.py``, through the same client) and
Debian's task-spooler (``tsp -f true``: queued to its server, waited for; skipped where ``tsp`` is
not installed). The four take turns, after a warm-up, so that the machine's noise falls on all alike.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import Figure, Relay, check_done, main, running_daemon, scratch, sdk_floor, summary

SAMPLES = 100
WARMUP = 10


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


@contextlib.contextmanager
def task_spooler(root: Path) -> Iterator[Callable[[], float] | None]:
    """``tsp -f true`` timed, with its socket and output files under ``root``; its server (started
    by the first call) is told to quit at the end. None where ``tsp`` is not installed."""
    tsp = shutil.which("tsp")
    if tsp is None:
        print("2: tsp (Debian's task-spooler) is not installed: its figure is skipped", file=sys.stderr)
        yield None
        return
    env = {**os.environ, "TS_SOCKET": str(root / "tsp.sock"), "TMPDIR": str(root)}
    try:
        yield lambda: timed([tsp, "-f", "true"], env)
    finally:
        if (root / "tsp.sock").exists():
            subprocess.run(
                [tsp, "-K"], env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )


def run() -> list[Figure]:
    calls, floor, sdk, spooled = [], [], [], []
    with (
        scratch() as root,
        running_daemon(root) as daemon,
        Relay(daemon.socket, root / "relay.err") as relay,
        sdk_floor(root) as server,
        task_spooler(root) as tsp,
    ):
        relay.handshake()
        server.handshake()
        for i in range(WARMUP + SAMPLES):
            took, result = relay.call("run", cmd="true", wait_seconds=30)
            check_done(result)
            spawn = timed(["sh", "-c", "true"])
            served, result = server.call("run", cmd="true", wait_seconds=30)
            check_done(result)
            queued = tsp() if tsp is not None else math.nan
            if i >= WARMUP:
                calls.append(took * 1000)
                floor.append(spawn * 1000)
                sdk.append(served * 1000)
                spooled.append(queued * 1000)
    c, f, s, t = summary(calls), summary(floor), summary(sdk), summary(spooled)
    return [
        Figure(
            "2 run round trip",
            f"run(true, wait_seconds=30) through the relay (median of {SAMPLES})",
            c["median"],
            "ms",
            f["median"],
            "spawn sh -c true",
            "<= 5x",
            {"calls": c, "floor": f},
        ),
        Figure(
            "2 run round trip",
            "the same / the mcp SDK's MCPServer on Trio, taking turns",
            c["median"],
            "ms",
            s["median"],
            "the SDK server's run(true, wait_seconds=30)",
            "<= 1.2x",
            {"calls": c, "sdk": s},
        ),
        Figure(
            "2 run round trip",
            "the same / task-spooler, taking turns",
            c["median"] if tsp is not None else math.nan,
            "ms",
            t["median"] if tsp is not None else None,
            "tsp -f true",
            "<= 1x" if tsp is not None else "",
            {"calls": c, "tsp": t},
        ),
    ]


if __name__ == "__main__":
    main(run)
