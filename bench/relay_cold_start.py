"""1. Relay cold start: spawning ``hive-bash-mcp``, and ``hive-subagent-mcp``, until its
``initialize`` answer arrives (from its daemon, already running: the first spawn of the subagent
relay, a warm-up, starts its daemon).

Floor: spawning the same venv's ``python -c pass`` until it exits. The three are measured in
alternation so that the machine's noise falls on all alike.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

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
from _subagent import SERVER, stop_daemon

SAMPLES = 20
WARMUP = 3


def relay_to_initialize(argv: list[str]) -> float:
    started = time.perf_counter()
    relay = subprocess.Popen(
        argv,
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
    subagent: list[float] = []
    floor: list[float] = []
    with scratch() as root, running_daemon(root) as daemon:
        state = Path(root) / "subagent-state"
        try:
            for i in range(WARMUP + SAMPLES):
                sample = relay_to_initialize([str(RELAY), "--socket", str(daemon.socket)])
                sub = relay_to_initialize([str(SERVER), "--state-dir", str(state)])
                base = python_pass()
                if i >= WARMUP:
                    relay.append(sample * 1000)
                    subagent.append(sub * 1000)
                    floor.append(base * 1000)
        finally:
            stop_daemon(state)
    r, s, f = summary(relay), summary(subagent), summary(floor)
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
        ),
        Figure(
            "1 cold start (subagent)",
            f"spawn hive-subagent-mcp → initialize answered by its running daemon (median of {SAMPLES})",
            s["median"],
            "ms",
            f["median"],
            "python -c pass",
            "<= 3x",
            {"relay": s, "floor": f},
        ),
    ]


if __name__ == "__main__":
    main(run)
