"""27. An isolated call: ``run(cmd="true", wait_seconds=30)`` at agents' gaps, hive against the `mcp` SDK's own server.

An agent calls ``run`` a few times a minute, not in a tight loop, and what a call costs after a
pause is not what it costs back to back (caches cool, a cgroup join may wait a grace period).
hive (``hive-bash-mcp`` relaying to ``hive-bash-daemon``) and ``sdk_floor_server.py`` (the `mcp`
SDK's ``MCPServer`` on Trio, ``bash -c CMD`` with ``trio.run_process``, a task table in memory)
take turns, after each call a pause of the gap: 0, 20, 100 and 300 ms, 30 calls each per gap
after 5 of warm-up. Also the CPU a call costs hive's daemon and the SDK's server.
"""

from __future__ import annotations

from _common import AGENT_GAPS_MS, Figure, Relay, alternate, main, running_daemon, scratch, sdk_floor, summary

SAMPLES = 30


def run() -> list[Figure]:
    figures = []
    with (
        scratch() as root,
        running_daemon(root) as daemon,
        Relay(daemon.socket, root / "relay.err") as relay,
        sdk_floor(root) as floor,
    ):
        for client in (relay, floor):
            client.handshake()
        servers = {"hive": (relay, daemon.pid), "sdk": (floor, floor.process.pid)}
        for gap in AGENT_GAPS_MS:
            measured = alternate(servers, gap, SAMPLES)
            h, s = summary(measured.took_ms["hive"]), summary(measured.took_ms["sdk"])
            cpu = measured.cpu_ms_a_call
            figures.append(
                Figure(
                    "27 isolated call",
                    f"run(true, wait_seconds=30) at {gap} ms gaps through the relay (median of {SAMPLES}; "
                    f"CPU a call: daemon {cpu['hive']:.1f}, SDK server {cpu['sdk']:.1f} ms)",
                    h["median"],
                    "ms",
                    s["median"],
                    "the mcp SDK's MCPServer on Trio",
                    "<= 2x",
                    {"hive": h, "sdk": s, "cpu_ms_a_call": cpu},
                )
            )
    return figures


if __name__ == "__main__":
    main(run)
