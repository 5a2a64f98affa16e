"""11. CLI cold start: spawning ``hive bash ls`` against a running daemon until it exits.

Floor: spawning the same venv's ``python -c pass`` until it exits. The two are measured in
alternation so that the machine's noise falls on both alike. ``hive bash run true`` (a task
started and answered inline) is measured the same way, for context.
"""

from __future__ import annotations

import subprocess
import time

from _common import BIN, PYTHON, Figure, main, running_daemon, scratch, summary

HIVE = BIN / "hive"
SAMPLES = 20
WARMUP = 3


def hive_bash(socket_path: str, *argv: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(HIVE), "bash", *argv, "--socket", socket_path], capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"hive bash {' '.join(argv)} failed: {done.stderr[-300:]!r}")
    return elapsed


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return time.perf_counter() - started


def run() -> list[Figure]:
    ls: list[float] = []
    run_true: list[float] = []
    floor: list[float] = []
    with scratch() as root, running_daemon(root) as daemon:
        sock = str(daemon.socket)
        for i in range(WARMUP + SAMPLES):
            a, b, base = hive_bash(sock, "ls"), hive_bash(sock, "run", "true", "--wait", "30"), python_pass()
            if i >= WARMUP:
                ls.append(a * 1000)
                run_true.append(b * 1000)
                floor.append(base * 1000)
    listed, ran, f = summary(ls), summary(run_true), summary(floor)
    return [
        Figure(
            "11 CLI cold start",
            f"spawn `hive bash ls` → exit (median of {SAMPLES})",
            listed["median"],
            "ms",
            f["median"],
            "python -c pass",
            "<= 3x",
            {"ls": listed, "floor": f},
        ),
        Figure(
            "11 CLI cold start",
            f"spawn `hive bash run true` → exit, answered inline (median of {SAMPLES})",
            ran["median"],
            "ms",
            f["median"],
            "python -c pass",
            "",
            {"run": ran, "floor": f},
        ),
    ]


if __name__ == "__main__":
    main(run)
