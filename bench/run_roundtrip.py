"""2. One ``run(cmd="true", wait_seconds=30)`` through the relay, answered inline once ``true`` ends.

Floor: spawning ``sh -c true`` directly and waiting for it (``subprocess.run``). Calls and
floor spawns alternate, after a warm-up, so that the machine's noise falls on both alike.
"""

from __future__ import annotations

import subprocess
import time

from _common import Figure, Relay, check_done, main, running_daemon, scratch, summary

SAMPLES = 100
WARMUP = 10


def sh_true() -> float:
    started = time.perf_counter()
    subprocess.run(["sh", "-c", "true"], check=True)
    return time.perf_counter() - started


def run() -> list[Figure]:
    calls, floor = [], []
    with scratch() as root, running_daemon(root) as daemon, Relay(daemon.socket, root / "relay.err") as relay:
        relay.handshake()
        for i in range(WARMUP + SAMPLES):
            took, result = relay.call("run", cmd="true", wait_seconds=30)
            check_done(result)
            spawn = sh_true()
            if i >= WARMUP:
                calls.append(took * 1000)
                floor.append(spawn * 1000)
    c, f = summary(calls), summary(floor)
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
        )
    ]


if __name__ == "__main__":
    main(run)
