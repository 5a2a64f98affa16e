"""3. 200 tasks at once, through hive's relay and daemon and through the `mcp` SDK's own server.

- 200 ``run(cmd="true", wait_seconds=30)`` written to the relay in one go: wall time from the
  write until the 200th answer. Floor: 200 concurrent ``true`` spawned and waited from one Trio
  program (``trio.run_process`` in a nursery).
- Start, then wait: 200 ``run(cmd="true", wait_seconds=0)`` written at once, all answered, then
  200 ``status(id, wait_seconds=30)`` written at once, all answered (the sum of the two batches'
  wall times). Floor: the same calls, in the same run, to the `mcp` SDK's high-level server on
  Trio with trivial tools of the same names (``sdk_floor_server.py``: a task table in memory,
  ``trio.run_process``, a ``trio.Event`` per task), and the *durable* floor: the same server with
  ``--durable``, which before each fork writes the task's record and loose end with a group
  commit (fsynced), and has the task's shell write its exit status to a file, as hive must. The
  three take turns, each going first in its share of the rounds.

Also the daemon's CPU time per batch and its peak RSS (VmHWM).
"""

from __future__ import annotations

import time

import trio
from _common import (
    Figure,
    Relay,
    StdioClient,
    check_done,
    cpu_seconds,
    file_system,
    main,
    running_daemon,
    scratch,
    sdk_floor,
    summary,
)

TASKS = 200
ROUNDS = 3
PAIR_ROUNDS = 7


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


def start_then_wait(client: StdioClient) -> tuple[float, float]:
    """The wall times of 200 ``run(wait 0)`` at once and then 200 ``status(wait 30)`` at once."""
    started, results = client.call_all(
        [client.tool_request("run", cmd="true", wait_seconds=0) for _ in range(TASKS)]
    )
    waited, finals = client.call_all(
        [client.tool_request("status", id=r["id"], wait_seconds=30) for r in results]
    )
    for result in finals:
        check_done(result)
    return started, waited


def run() -> list[Figure]:
    walls, floors, cpu = [], [], []
    hive: list[tuple[float, float]] = []
    sdk: list[tuple[float, float]] = []
    sdk_durable: list[tuple[float, float]] = []
    pair_cpu, floor_cpu, durable_cpu = [], [], []
    with (
        scratch() as root,
        running_daemon(root) as daemon,
        Relay(daemon.socket, root / "relay.err") as relay,
        sdk_floor(root) as floor,
        sdk_floor(root, "--durable", str(root / "durable-floor"), name="durable") as durable,
    ):
        fs = file_system(root)
        for client in (relay, floor, durable):
            client.handshake()
        for _ in range(20):
            for client in (relay, floor, durable):
                check_done(client.call("run", cmd="true", wait_seconds=30)[1])
        for client in (relay, floor, durable):
            start_then_wait(client)
        rss_before = daemon.peak_rss_mb()
        for _ in range(ROUNDS):
            floors.append(trio_floor() * 1000)
            before = daemon.cpu()
            walls.append(all_at_once(relay) * 1000)
            cpu.append(daemon.cpu() - before)
        orders = [(relay, floor, durable), (floor, durable, relay), (durable, relay, floor)]
        for i in range(PAIR_ROUNDS):
            for client in orders[i % 3]:
                server = daemon.pid if client is relay else client.process.pid
                before = cpu_seconds(server)
                batches = start_then_wait(client)
                used = cpu_seconds(server) - before
                if client is relay:
                    pair_cpu.append(used)
                    hive.append(batches)
                elif client is floor:
                    floor_cpu.append(used)
                    sdk.append(batches)
                else:
                    durable_cpu.append(used)
                    sdk_durable.append(batches)
        rss_after = daemon.peak_rss_mb()
    w, f = summary(walls), summary(floors)
    h, s = summary((a + b) * 1000 for a, b in hive), summary((a + b) * 1000 for a, b in sdk)
    d = summary((a + b) * 1000 for a, b in sdk_durable)
    ratios = summary((a + b) / (c + d) for (a, b), (c, d) in zip(hive, sdk, strict=True))
    durable_ratios = summary((a + b) / (c + d) for (a, b), (c, d) in zip(hive, sdk_durable, strict=True))
    memory = {"peak_rss_mb_before": rss_before, "peak_rss_mb_after": rss_after}
    batches = {
        "state_dir_file_system": fs,
        "hive_run_ms": summary(a * 1000 for a, _ in hive),
        "hive_status_ms": summary(b * 1000 for _, b in hive),
        "sdk_run_ms": summary(a * 1000 for a, _ in sdk),
        "sdk_status_ms": summary(b * 1000 for _, b in sdk),
    }
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
            f"200 x run(wait_seconds=0) at once, then 200 x status(wait_seconds=30) at once "
            f"(median of {PAIR_ROUNDS}, taking turns; state on {fs}): hive / the durable SDK floor",
            h["median"],
            "ms",
            d["median"],
            "the same calls to the mcp SDK's MCPServer on Trio, writing a record and a loose end "
            "(fsynced) before each fork and an exit status file",
            "<= 1.2x",
            {"hive": h, "sdk_durable": d, "per_round_ratio": durable_ratios, "durable_cpu_s": durable_cpu},
        ),
        Figure(
            "3 200 at once",
            "the same: hive / the in-memory SDK floor (for context)",
            h["median"],
            "ms",
            s["median"],
            "the same calls to the mcp SDK's MCPServer on Trio, in memory",
            "",
            {"hive": h, "sdk": s, "per_round_ratio": ratios, **batches, "daemon_cpu_s": pair_cpu},
        ),
        Figure(
            "3 200 at once",
            "of which the 200 runs: hive / SDK floor",
            batches["hive_run_ms"]["median"],
            "ms",
            batches["sdk_run_ms"]["median"],
            "SDK floor",
        ),
        Figure(
            "3 200 at once",
            "of which the 200 statuses: hive / SDK floor",
            batches["hive_status_ms"]["median"],
            "ms",
            batches["sdk_status_ms"]["median"],
            "SDK floor",
        ),
        Figure(
            "3 200 at once",
            "daemon CPU time per 200 x run(wait 30) (median)",
            summary(cpu)["median"] * 1000,
            "ms",
            extra={"daemon_cpu_s": cpu},
        ),
        Figure(
            "3 200 at once",
            "CPU time per 200 x run(wait 0) + 200 x status (median): hive's daemon / the SDK floor's server",
            summary(pair_cpu)["median"] * 1000,
            "ms",
            summary(floor_cpu)["median"] * 1000,
            "SDK floor server",
            extra={"daemon_cpu_s": pair_cpu, "floor_cpu_s": floor_cpu},
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
