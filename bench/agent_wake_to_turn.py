"""14. From a bash task's end to the next turn's prompt reaching the agent, through ``hive-agent``.

``hive-agent --with-bash-daemon`` runs the scripted ACP agent (``fixtures/acp_agent.py``, its
default turn: it echoes the prompt and ends), idle between samples. Each task, started through the
bash relay with ``run(wait_seconds=0, name=wN)``, is ``sleep 0.2; date +%s%N > stamp``: the stamp
is its last act. The agent records each line it reads with ``time.time()`` (its ``in`` event): the
latency is that record of the ``session/prompt`` carrying ``bash-task-wN``, minus the stamp.
3 warm-up + 50 samples, one at a time (each waits for its turn's end), median.

It is split by the times the turn log holds: the wake's arrival at the harness (the carried item's
``at``), the turn's start (``started``): daemon (task end → wake arrives), harness (arrival →
turn start: the durable queue's append and sync, the turn loop), runtime (turn start → prompt
read by the agent).

The durable queue on its own: ``QueueFile.append`` of one wake's record (a write and an
``fdatasync`` in a worker thread, as the harness does it), on the same disk, in this process;
3 warm-up + 50, median.

Floor, for context: benchmark 5's, the same command spawned from here, then one wake line sent
to a bare listener. Targets: the latency under 25 ms; the queue's append at most 3 ms.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trio
from _agent import acp_env, jsonl, running_agent, wait_turns
from _common import Figure, Relay, main, scratch, summary
from wake_latency import Listener, ended_at, floor_sample

from hive.agent._harness_files import Added
from hive.agent._model import Item, ItemKind
from hive.agent._queue import open_queue_file

SAMPLES = 50
WARMUP = 3


def prompt_read_at(record: Path, sender: str) -> float:
    """When the agent read the ``session/prompt`` line carrying ``sender`` (its record's time)."""
    for event in jsonl(record):
        message = event.get("message") or {}
        if (
            event.get("event") == "in"
            and message.get("method") == "session/prompt"
            and f"[wake from {sender}]" in json_text(message)
        ):
            return float(event["ts"])
    raise RuntimeError(f"the agent read no prompt carrying {sender}")


def json_text(message: dict[str, object]) -> str:
    params = message.get("params") or {}
    blocks = params.get("prompt", []) if isinstance(params, dict) else []
    return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))


def queue_appends(directory: Path, count: int) -> list[float]:
    """Seconds for each of ``count`` appends of one wake's record to a queue file in ``directory``."""

    async def appends() -> list[float]:
        queue, _ = await open_queue_file(directory / "queue")
        took = []
        try:
            for seq in range(1, count + 1):
                item = Item(
                    ItemKind.WAKE,
                    f"bash-task-q{seq}",
                    "bash task ended: done, exit code 0",
                    f"q{seq}:s",
                    seq=seq,
                )
                started = time.perf_counter()
                await queue.append([Added(item)])
                took.append(time.perf_counter() - started)
        finally:
            queue.close()
        return took

    return trio.run(appends)


def run() -> list[Figure]:
    total: list[float] = []
    daemon: list[float] = []
    harness: list[float] = []
    runtime: list[float] = []
    floor: list[float] = []
    with scratch() as root:
        listener_path = root / "floor.sock"
        with Listener(listener_path) as listener, running_agent(root, acp_env(root)) as agent:
            threading.Thread(target=listener.serve_forever, daemon=True).start()
            try:
                with Relay(agent.bash_socket, root / "relay.err") as relay:
                    relay.handshake()
                    for i in range(WARMUP + SAMPLES):
                        stamp = root / f"task-{i}"
                        _, result = relay.call(
                            "run", cmd=f"sleep 0.2; date +%s%N > {stamp}", wait_seconds=0, name=f"w{i}"
                        )
                        if result["state"] not in ("pending", "running"):
                            raise RuntimeError(
                                f"the task ended inside run's answer, so no wake follows: {result}"
                            )
                        turn = wait_turns(agent, i + 1)[i]
                        (carried,) = turn["carried"]
                        if carried["from"] != f"bash-task-w{i}":
                            raise RuntimeError(f"turn {i + 1} carried {carried['from']}, not bash-task-w{i}")
                        ended, read = ended_at(stamp), prompt_read_at(root / "acp.jsonl", f"bash-task-w{i}")
                        base = floor_sample(root, listener, listener_path, i)
                        if i >= WARMUP:
                            total.append((read - ended) * 1000)
                            daemon.append((carried["at"] - ended) * 1000)
                            harness.append((turn["started"] - carried["at"]) * 1000)
                            runtime.append((read - turn["started"]) * 1000)
                            floor.append(base * 1000)
            finally:
                listener.shutdown()
        queue = [t * 1000 for t in queue_appends(root, WARMUP + SAMPLES)[WARMUP:]]
    t, d, h, r, q, f = (summary(x) for x in (total, daemon, harness, runtime, queue, floor))
    parts = f"daemon {d['median']:.1f} + harness {h['median']:.1f} + runtime {r['median']:.1f} ms"
    return [
        Figure(
            "14 wake to turn",
            f"task's last act → the next turn's prompt read by the agent (median of {SAMPLES}; p90 "
            f"{t['p90']:.1f} ms; {parts})",
            t["median"],
            "ms",
            f["median"],
            "spawn, wait, send one wake line",
            "< 25 ms",
            {"total": t, "daemon": d, "harness": h, "runtime": r, "floor": f},
        ),
        Figure(
            "14 wake to turn",
            f"the durable queue: one wake's append + fdatasync in a worker thread (median of {SAMPLES}; "
            f"p90 {q['p90']:.2f} ms)",
            q["median"],
            "ms",
            None,
            "",
            "<= 3 ms",
            {"queue": q},
        ),
    ]


if __name__ == "__main__":
    main(run)
