"""17. A refused daemon start: ``hive-bash-daemon --kill-grace soon`` from spawn to its exit (status 2).

The daemon reads its command line before it imports Trio, the MCP SDK or the task machinery, so
a start it refuses costs about an interpreter's start. Floor: spawning the same venv's
``python -c pass`` until it exits, in alternation with the above.
"""

from __future__ import annotations

import subprocess
import time

from _common import DAEMON, PYTHON, Figure, main, summary

SAMPLES = 20
WARMUP = 3


def refused_start() -> float:
    started = time.perf_counter()
    result = subprocess.run([str(DAEMON), "--kill-grace", "soon"], capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 2 or b"--kill-grace" not in result.stderr:
        raise RuntimeError(
            f"expected a refusal naming --kill-grace: {result.returncode} {result.stderr[:300]!r}"
        )
    return elapsed


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return time.perf_counter() - started


def run() -> list[Figure]:
    refused: list[float] = []
    floor: list[float] = []
    for i in range(WARMUP + SAMPLES):
        sample, base = refused_start(), python_pass()
        if i >= WARMUP:
            refused.append(sample * 1000)
            floor.append(base * 1000)
    r, f = summary(refused), summary(floor)
    return [
        Figure(
            "17 refused start",
            f"spawn hive-bash-daemon --kill-grace soon → exit 2 (median of {SAMPLES})",
            r["median"],
            "ms",
            f["median"],
            "python -c pass",
            "<= 3x",
            {"refused": r, "floor": f},
        )
    ]


if __name__ == "__main__":
    main(run)
