"""Where the daemon's CPU goes per trivial call (issue 41): ``run(true, wait_seconds=30)`` through
the relay, a pause of GAP ms after each, and each daemon thread's CPU a call.

    python bench/profile_daemon.py [CALLS] [GAP_MS] [PROFILER ARGV with PID for the daemon's pid]

e.g. ``... 200 20 perf record -g -p PID -o perf.data`` or ``... 200 20 strace -f -c -p PID``:
the profiler is started after the warm-up and told SIGINT after the last call.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from _common import CLK_TCK, Relay, check_done, running_daemon, scratch, summary

WARMUP = 10


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """Each thread of ``pid``: its name and its CPU seconds so far."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            stat = f.read()
        name, fields = stat[stat.index(b"(") + 1 : stat.rindex(b")")], stat.rsplit(b")", 1)[1].split()
        threads[tid] = (name.decode(errors="replace"), (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return threads


def profile(calls: int, gap_ms: float, profiler: list[str]) -> None:
    with scratch() as root, running_daemon(root) as daemon, Relay(daemon.socket, root / "relay.err") as relay:
        relay.handshake()
        for _ in range(WARMUP):
            check_done(relay.call("run", cmd="true", wait_seconds=30)[1])
        argv = [arg.replace("PID", str(daemon.pid)) for arg in profiler]
        watcher = subprocess.Popen(argv) if argv else None
        time.sleep(1 if argv else 0)  # the profiler attaches
        before, took = thread_cpu(daemon.pid), []
        for _ in range(calls):
            seconds, result = relay.call("run", cmd="true", wait_seconds=30)
            check_done(result)
            took.append(seconds * 1000)
            time.sleep(gap_ms / 1000)
        after = thread_cpu(daemon.pid)
        if watcher is not None:
            watcher.send_signal(signal.SIGINT)
            watcher.wait()
    print(f"round trip: median {summary(took)['median']:.2f} ms over {calls} calls at {gap_ms} ms gaps")
    for tid, (name, cpu) in after.items():
        print(f"{name:>20} {(cpu - before.get(tid, (name, 0.0))[1]) * 1000 / calls:6.2f} ms CPU a call")


if __name__ == "__main__":
    profile(
        int(sys.argv[1]) if len(sys.argv) > 1 else 200,
        float(sys.argv[2]) if len(sys.argv) > 2 else 20,
        sys.argv[3:],
    )
