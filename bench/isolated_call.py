"""27. An isolated call: ``run(cmd="true", wait_seconds=30)`` at agents' gaps, hive against the `mcp` SDK's own server.

An agent calls ``run`` a few times a minute, not in a tight loop, and what a call costs after a
pause is not what it costs back to back (caches cool, a cgroup join may wait a grace period).
hive (``hive-bash-mcp`` relaying to ``hive-bash-daemon``) and ``sdk_floor_server.py`` (the `mcp`
SDK's ``MCPServer`` on Trio, ``bash -c CMD`` with ``trio.run_process``, a task table in memory)
take turns, after each call a pause of the gap: 0, 20, 100 and 300 ms, 30 calls each per gap
after 5 of warm-up. Also the CPU a call costs hive's daemon and the SDK's server.
"""

from __future__ import annotations

from _common import Figure, Relay, at_agents_gaps, main, running_daemon, scratch, sdk_floor

SAMPLES = 30


def run() -> list[Figure]:
    with (
        scratch() as root,
        running_daemon(root) as daemon,
        Relay(daemon.socket, root / "relay.err") as relay,
        sdk_floor(root) as floor,
    ):
        for client in (relay, floor):
            client.handshake()
        servers = {"hive": (relay, daemon.pid), "sdk": (floor, floor.process.pid)}
        return at_agents_gaps(
            "27 isolated call",
            servers,
            lambda gap, cpu: (
                f"run(true, wait_seconds=30) at {gap} ms gaps through the relay (median of {SAMPLES}; "
                f"CPU a call: daemon {cpu['hive']:.1f}, SDK server {cpu['sdk']:.1f} ms)"
            ),
            "the mcp SDK's MCPServer on Trio",
            target="<= 2x",
            samples=SAMPLES,
        )


if __name__ == "__main__":
    main(run)
