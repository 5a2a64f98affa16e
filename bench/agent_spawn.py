"""The cost of spawning an agent with a parent-death signal, from a process of hive-agent's size.

hive spawns every agent with ``preexec_fn=die_with_parent()`` (``hive.runtime._lifetime``), which
makes ``subprocess`` fork (copying the parent's page tables) instead of its vfork/posix_spawn
path, and the fork is made on Trio's thread (the parent-death signal follows the forking
thread), so it holds the event loop meanwhile. This times ``Popen`` to return, for
``/bin/true`` with hive's spawn options, with and without that ``preexec_fn``, alternating;
20 warm-up pairs, then 200, median and p10/p90. ``--big`` first imports what the hyperhive
server adds to hive-agent (the ``mcp`` SDK, hypercorn), for a parent of hive-agent's RSS.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import trio  # noqa: F401

import hive.agent.harness  # noqa: F401 - a parent with hive-agent's imports
from hive.runtime._lifetime import die_with_parent

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


def main() -> None:
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
