"""15. A burst of 1,000 wakes sent at once while a turn runs: the turns that carry them, and RSS.

``hive-agent --with-bash-daemon`` runs the scripted ACP agent, whose first turn sleeps
(``HOLD`` s) and whose later turns echo their prompt. An operator message starts that first turn;
once the agent has read its prompt, 1,000 wakes (``bash-task-b0`` … ``b999``, each with its own
end id) are written to the agent socket over ``CONNECTIONS`` connections, every line written
before any answer is read; then every answer (``{"ok":true}``) is read. The burst must be
acknowledged before the first turn ends (checked: otherwise the figures say nothing and the run
fails). Then the turns that follow are waited for until all 1,000 are carried.

Figures: how many turns carried the wakes (target 1 or 2); how many were lost or carried twice
(target 0); the time from the first write to the last acknowledgement, and the queue file's size;
hive-agent's RSS (VmRSS) when idle before the first turn and idle after the burst's turns, and its
peak (VmHWM) (target: under 80 MB, flat).
"""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _agent import acp_env, jsonl, prompt, running_agent, turn_records, wait_turns
from _common import Figure, main, scratch

WAKES = 1000
CONNECTIONS = 50
HOLD = 15.0


def wait_prompt_read(record: Path, count: int, timeout: float = 60.0) -> None:
    """Until the agent has read ``count`` prompts."""
    deadline = time.monotonic() + timeout
    while True:
        read = [
            e
            for e in jsonl(record)
            if e.get("event") == "in" and (e.get("message") or {}).get("method") == "session/prompt"
        ]
        if len(read) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the agent read no prompt #{count} within {timeout} s")
        time.sleep(0.001)


def burst(path: Path) -> tuple[float, float]:
    """Send the wakes; the seconds from the first write to the last answer, and when that was
    (Unix time)."""
    wakes = [
        {
            "type": "wake",
            "from": f"bash-task-b{i}",
            "body": f"bash task b{i} ended: done, exit code 0",
            "transient": True,
            "end_id": f"b{i}:burst",
        }
        for i in range(WAKES)
    ]
    socks = []
    for _ in range(CONNECTIONS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        socks.append(sock)
    per = WAKES // CONNECTIONS
    started = time.perf_counter()
    for n, sock in enumerate(socks):
        sock.sendall(b"".join(json.dumps(w).encode() + b"\n" for w in wakes[n * per : (n + 1) * per]))
    for sock in socks:
        reader = sock.makefile("rb")
        for _ in range(per):
            answer = json.loads(reader.readline())
            if not answer.get("ok"):
                raise RuntimeError(f"a wake was refused: {answer}")
        reader.close()
    took, at = time.perf_counter() - started, time.time()
    for sock in socks:
        sock.close()
    return took, at


def run() -> list[Figure]:
    with scratch() as root:
        script: dict[str, Any] = {"turns": [[{"sleep": HOLD}], "default"]}
        with running_agent(root, acp_env(root, script)) as agent:
            idle_before = agent.rss_mb()
            prompt(agent.socket, "Hold on while the wakes arrive.")
            wait_prompt_read(root / "acp.jsonl", 1)
            took, acknowledged_at = burst(agent.socket)
            queue_bytes = (agent.state / "queue").stat().st_size
            first = wait_turns(agent, 1, timeout=HOLD + 60)[0]
            if acknowledged_at >= first["ended"]:
                raise RuntimeError(
                    f"the burst was acknowledged {acknowledged_at - first['ended']:.2f} s after the first "
                    f"turn ended: raise HOLD ({HOLD} s) on this machine"
                )
            deadline = time.monotonic() + 120
            while sum(len(t["carried"]) for t in turn_records(agent)) < WAKES + 1:
                if time.monotonic() > deadline:
                    raise TimeoutError("the burst's wakes were not all carried within 120 s")
                wait_turns(agent, len(turn_records(agent)) + 1, timeout=120)
            turns = turn_records(agent)
            idle_after = agent.rss_mb()
            peak = agent.peak_rss_mb()
    carrying = [t for t in turns if any(c["kind"] == "wake" for c in t["carried"])]
    counts = Counter(c["from"] for t in turns for c in t["carried"] if c["kind"] == "wake")
    lost = sum(1 for i in range(WAKES) if counts[f"bash-task-b{i}"] == 0)
    twice = sum(1 for n in counts.values() if n > 1)
    outcomes = ", ".join(f"turn {t['turn']}: {len(t['carried'])} carried, {t['outcome']}" for t in carrying)
    return [
        Figure(
            "15 burst",
            f"{WAKES} wakes sent at once during a turn: turns that carried them ({outcomes})",
            len(carrying),
            "turns",
            None,
            "",
            "<= 2 turns",
            {"turns": [{k: t[k] for k in ("turn", "outcome", "started", "ended")} for t in turns]},
        ),
        Figure(
            "15 burst",
            f"wakes lost ({lost}) or carried twice ({twice}); all {WAKES} acknowledged in {took * 1000:.0f} ms "
            f"over {CONNECTIONS} connections (queue file {queue_bytes // 1024} KiB)",
            lost + twice,
            "wakes",
            None,
            "",
            "<= 0 wakes",
            {"lost": lost, "twice": twice, "ack_ms": took * 1000, "queue_bytes": queue_bytes},
        ),
        Figure(
            "15 burst",
            "hive-agent's RSS, idle before the first turn",
            idle_before,
            "MB",
            None,
            "",
            "< 80 MB",
        ),
        Figure(
            "15 burst",
            f"hive-agent's RSS, idle after the burst's turns (peak VmHWM {peak:.1f} MB)",
            idle_after,
            "MB",
            None,
            "",
            "< 80 MB",
            {"peak_mb": peak},
        ),
    ]


if __name__ == "__main__":
    main(run)
