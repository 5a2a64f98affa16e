"""26. A task's join of its cgroup: created in it (clone3) against a write to cgroup.procs, at agents' gaps.

An agent calls ``run`` a few times a minute, not in a tight loop, and joining a cgroup by a write
to ``cgroup.procs`` waits an RCU grace period whenever the previous write is older than one; a
benchmark back to back hides that. Two daemons run side by side, each task in a cgroup of its
own: one spawns through ``hive._clone3`` (``CLONE_INTO_CGROUP``), the other as where the extension
was not built (its import made to fail: the wrapper writes ``cgroup.procs``). Their
``run(cmd="true", wait_seconds=30)`` calls take turns, after each a pause of the gap. Also each
daemon's CPU per task. Needs a writable cgroup v2 hierarchy (root, or a delegated subtree).
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import Figure, Relay, at_agents_gaps, main, running_daemon, scratch

SAMPLES = 30


def unbuilt(root: Path) -> dict[str, str]:
    """The environment of a daemon whose ``import hive._clone3`` fails."""
    site = root / "no-clone3"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['hive._clone3'] = None\n")
    return {"PYTHONPATH": str(site)}


def held_by_cgroup(relay: Relay) -> bool:
    _took, result = relay.call("run", cmd="true", wait_seconds=30, full=True)
    if result.get("held_by") == "cgroup":
        return True
    print(f"26: tasks are not held by a cgroup here ({result.get('held_by')}): skipped", file=sys.stderr)
    return False


def run() -> list[Figure]:
    with (
        scratch() as fast_root,
        scratch() as slow_root,
        running_daemon(fast_root) as fast,
        running_daemon(slow_root, env=unbuilt(slow_root)) as slow,
        Relay(fast.socket, fast_root / "relay.err") as fast_relay,
        Relay(slow.socket, slow_root / "relay.err") as slow_relay,
    ):
        for relay in (fast_relay, slow_relay):
            relay.handshake()
        if not all(held_by_cgroup(relay) for relay in (fast_relay, slow_relay)):
            return []
        if "hive._clone3 is not built" not in (slow_root / "daemon.err").read_text():
            raise RuntimeError("the fallback daemon did not say it falls back")
        servers = {"clone3": (fast_relay, fast.pid), "cgroup.procs": (slow_relay, slow.pid)}
        return at_agents_gaps(
            "26 cgroup join",
            servers,
            lambda gap, cpu: (
                f"run(true) at {gap} ms gaps, task created in its cgroup (median of {SAMPLES}; "
                f"daemon CPU {cpu['clone3']:.1f} vs {cpu['cgroup.procs']:.1f} ms a task)"
            ),
            "the same, joined by a write to cgroup.procs",
            samples=SAMPLES,
        )


if __name__ == "__main__":
    main(run)
