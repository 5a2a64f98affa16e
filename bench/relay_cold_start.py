"""1. Relay cold start: spawning ``hive-bash-mcp`` until its ``initialize`` answer arrives.

Floor: spawning the same venv's ``python -c pass`` until it exits. The two are measured in
alternation so that the machine's noise falls on both alike.
"""

from __future__ import annotations

import subprocess
import time

from _common import (
    INITIALIZED,
    PYTHON,
    RELAY,
    Figure,
    initialize_request,
    line,
    main,
    running_daemon,
    scratch,
    summary,
)

SAMPLES = 20
WARMUP = 3


def relay_to_initialize(socket_path: str) -> float:
    started = time.perf_counter()
    relay = subprocess.Popen(
        [str(RELAY), "--socket", socket_path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert relay.stdin is not None and relay.stdout is not None
    relay.stdin.write(line(initialize_request()))
    relay.stdin.flush()
    answer = relay.stdout.readline()
    elapsed = time.perf_counter() - started
    if b'"result"' not in answer:
        raise RuntimeError(f"initialize failed: {answer[:300]!r}")
    relay.stdin.write(line(INITIALIZED))
    relay.stdin.close()
    relay.stdout.read()
    relay.wait(10)
    return elapsed


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return time.perf_counter() - started


def run() -> list[Figure]:
    relay: list[float] = []
    floor: list[float] = []
    with scratch() as root, running_daemon(root) as daemon:
        for i in range(WARMUP + SAMPLES):
            sample, base = relay_to_initialize(str(daemon.socket)), python_pass()
            if i >= WARMUP:
                relay.append(sample * 1000)
                floor.append(base * 1000)
    r, f = summary(relay), summary(floor)
    return [
        Figure(
            "1 cold start",
            f"spawn hive-bash-mcp → initialize answered (median of {SAMPLES})",
            r["median"],
            "ms",
            f["median"],
            "python -c pass",
            "<= 3x",
            {"relay": r, "floor": f},
        )
    ]


if __name__ == "__main__":
    main(run)
