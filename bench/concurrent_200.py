"""3. 200 tasks at once: 200 ``run(cmd="true", wait_seconds=30)`` written to the relay in one go.

Wall time from the write until the 200th answer. Floor: 200 concurrent ``true`` spawned and
waited from one Trio program (``trio.run_process`` in a nursery). Also the start-then-wait
pattern (200 ``run(wait_seconds=0)`` at once, then 200 ``status(id, wait_seconds=30)`` at
once), the daemon's CPU time per round and its peak RSS (VmHWM).
"""

from __future__ import annotations

import time

import trio
from _common import Figure, Relay, check_done, main, running_daemon, scratch, summary

TASKS = 200
ROUNDS = 3


async def _spawn_all() -> float:
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(TASKS):
            nursery.start_soon(trio.run_process, ["true"])
    return time.perf_counter() - started


def trio_floor() -> float:
    return trio.run(_spawn_all)


def all_at_once(relay: Relay) -> float:
    took, results = relay.call_all(
        [relay.tool_request("run", cmd="true", wait_seconds=30) for _ in range(TASKS)]
    )
    for result in results:
        check_done(result)
    return took


def start_then_wait(relay: Relay) -> float:
    started, results = relay.call_all(
        [relay.tool_request("run", cmd="true", wait_seconds=0) for _ in range(TASKS)]
    )
    waited, finals = relay.call_all(
        [relay.tool_request("status", id=r["id"], wait_seconds=30) for r in results]
    )
    for result in finals:
        check_done(result)
    return started + waited


def run() -> list[Figure]:
    walls, pairs, floors, cpu = [], [], [], []
    with scratch() as root, running_daemon(root) as daemon, Relay(daemon.socket, root / "relay.err") as relay:
        relay.handshake()
        for _ in range(20):
            check_done(relay.call("run", cmd="true", wait_seconds=30)[1])
        rss_before = daemon.peak_rss_mb()
        for _ in range(ROUNDS):
            floors.append(trio_floor() * 1000)
            before = daemon.cpu()
            walls.append(all_at_once(relay) * 1000)
            cpu.append(daemon.cpu() - before)
            pairs.append(start_then_wait(relay) * 1000)
        rss_after = daemon.peak_rss_mb()
    w, p, f = summary(walls), summary(pairs), summary(floors)
    memory = {"peak_rss_mb_before": rss_before, "peak_rss_mb_after": rss_after}
    return [
        Figure(
            "3 200 at once",
            f"200 x run(true, wait_seconds=30) at once, all answered (median of {ROUNDS})",
            w["median"],
            "ms",
            f["median"],
            "200 x true from Trio",
            "<= 4x",
            {"wall": w, "floor": f, "daemon_cpu_s": cpu, **memory},
        ),
        Figure(
            "3 200 at once",
            f"200 x run(wait_seconds=0), then 200 x status(wait_seconds=30) (median of {ROUNDS})",
            p["median"],
            "ms",
            f["median"],
            "200 x true from Trio",
            extra={"wall": p, "floor": f},
        ),
        Figure(
            "3 200 at once",
            "daemon CPU time per 200 x run (median)",
            summary(cpu)["median"] * 1000,
            "ms",
            extra={"daemon_cpu_s": cpu},
        ),
        Figure(
            "3 200 at once",
            f"daemon peak RSS (VmHWM) after all rounds; {rss_before:.1f} MB before them",
            rss_after,
            "MB",
            extra=memory,
        ),
    ]


if __name__ == "__main__":
    main(run)
