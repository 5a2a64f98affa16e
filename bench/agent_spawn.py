"""The cost of spawning an agent with a parent-death signal, from a process of hive-agent's size.

Where hive._clone3 is not built, hive spawns every agent with ``preexec_fn=die_with_parent()``
(``hive._spawn``'s fallback), which makes ``subprocess`` fork (copying the parent's page tables) instead of its vfork/posix_spawn
path, and the fork is made on Trio's thread (the parent-death signal follows the forking
thread), so it holds the event loop meanwhile. This times ``Popen`` to return, for
``/bin/true`` with hive's spawn options, with and without that ``preexec_fn``, alternating;
20 warm-up pairs, then 200, median and p10/p90. ``--big`` first imports what the hyperhive
server adds to hive-agent (the ``mcp`` SDK, hypercorn), for a parent of hive-agent's RSS.

``--guard`` times instead what a turn's start pays in ``hive.runtime._prestart.spawn`` (pipes
and all, and the start time the record of the agents reads), alternating: following the parent
(hive._clone3 where it is built, else the ``preexec_fn``), against spawned plainly and handed to
the agents' sentinel (a line written to its pipe, as ``hive.runtime._guard`` does). And the
sentinel's own start (spawn to exit on a pipe that ends at once) and RSS.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import trio  # noqa: F401

import hive.agent.harness  # noqa: F401 - a parent with hive-agent's imports
from hive._proc import start_time
from hive._spawn import die_with_parent
from hive.runtime import _guard
from hive.runtime._prestart import spawn

if "--big" in sys.argv:
    import hypercorn.trio  # noqa: F401
    import mcp.client.session
    import mcp.server  # noqa: F401


def once(preexec: Callable[[], None] | None) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(
        ["/bin/true"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec,  # noqa: PLW1509 - the point of the measurement
    )
    spawned = time.perf_counter() - started
    process.wait()
    return spawned


def spawned_by_hive(follow_parent: bool, pipe: int) -> float:
    started = time.perf_counter()
    spawned = spawn(
        ["/bin/true"], cwd=Path.cwd(), env=os.environ, stdin_pipe=False, follow_parent=follow_parent
    )
    started_at = start_time(spawned.popen.pid)  # read for the record of the agents, either way
    if not follow_parent:
        os.write(pipe, f"{spawned.popen.pid} {started_at}\n".encode())
    elapsed = time.perf_counter() - started
    spawned.popen.wait()
    for fd in (spawned.stdout, spawned.stderr):
        os.close(fd)
    return elapsed


def sentinel_start() -> None:
    """The sentinel's start, to its exit on a pipe that ends at once (its imports and its exit:
    an upper bound of what its start costs), and its RSS while it waits on its pipe."""
    samples = []
    for _ in range(21):
        read, write = os.pipe()
        os.close(write)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", _guard._PROGRAM], stdin=read, check=True)
        samples.append(time.perf_counter() - started)
        os.close(read)
    read, write = os.pipe()
    sentinel = subprocess.Popen([sys.executable, "-I", "-S", "-c", _guard._PROGRAM], stdin=read)
    time.sleep(3)  # a benchmark's own wait, well past its start: nothing tells when it reads
    with open(f"/proc/{sentinel.pid}/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    os.close(write)
    sentinel.wait()
    os.close(read)
    print(
        f"the sentinel, spawn to exit on an empty pipe: median {statistics.median(samples) * 1e3:.1f} ms; "
        f"RSS while it waits {int(rss) / 1024:.1f} MiB"
    )


def guard_main() -> None:
    read, write = os.pipe()
    drain = subprocess.Popen(["cat"], stdin=read, stdout=subprocess.DEVNULL)
    os.close(read)
    arms: dict[str, list[float]] = {"following the parent": [], "guarded by the sentinel": []}
    for round in range(220):
        for name, follow in (("following the parent", True), ("guarded by the sentinel", False)):
            elapsed = spawned_by_hive(follow, write)
            if round >= 20:
                arms[name].append(elapsed)
    os.close(write)
    drain.wait()
    for name, samples in arms.items():
        samples.sort()
        print(
            f"{name}: median {statistics.median(samples) * 1e3:.2f} ms, "
            f"p10 {samples[20] * 1e3:.2f}, p90 {samples[180] * 1e3:.2f}"
        )
    sentinel_start()


def main() -> None:
    if "--guard" in sys.argv:
        guard_main()
        return
    for _ in range(20):
        once(None)
        once(die_with_parent())
    plain: list[float] = []
    pdeath: list[float] = []
    for _ in range(200):
        plain.append(once(None))
        pdeath.append(once(die_with_parent()))
    with open("/proc/self/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    print(f"parent RSS {int(rss) // 1024} MiB")
    for name, samples in (("without preexec_fn (vfork)", plain), ("with die_with_parent (fork)", pdeath)):
        samples.sort()
        print(
            f"{name}: median {statistics.median(samples) * 1e3:.2f} ms, "
            f"p10 {samples[20] * 1e3:.2f}, p90 {samples[180] * 1e3:.2f}"
        )


if __name__ == "__main__":
    main()
