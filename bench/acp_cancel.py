"""9. Cancel latency: ``Canceller.cancel()`` to ``run()`` returning, against a well-behaved agent.

The agent is ``fixtures/acp_agent.py`` (the official ACP SDK, asyncio) playing, on every prompt,
a ``usage_update`` and then a text chunk every 20 ms for 10 s; ``on_cancel: honour`` (a
``session/cancel`` ends the wait at once and answers ``cancelled``). One agent serves all turns
of hive, another all turns of the bare driver; they take turns in blocks of 10 (3 warm-up turns
each first), 50 turns each, one at a time:

- hive: one ``open_acp_runtime``; each turn is ``run`` into a sink whose first
  ``context_usage`` (the ``usage_update``) lets a task sleep 20-120 ms (seeded) and then call
  ``runtime.canceller().cancel()``; measured from just before that call to ``run`` returning
  (hive then has sent ``session/cancel``, read the ``cancelled`` answer and written the
  ``result``). The outcome is checked to be CANCELLED.
- floor: ``_acp.RawAgent`` does the same by hand: after the first update and the same sleep it
  writes ``session/cancel``; measured from that write to the prompt answer's line arriving (the
  agent's own latency, plus a pipe each way).
"""

from __future__ import annotations

import gc
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import trio
from _acp import RawAgent, StampSink
from _common import PYTHON, Figure, main, scratch, summary

from hive.acp import AcpRuntime, open_acp_runtime
from hive.runtime import Backend, CompactionPolicy, Config, RuntimeSpec, StopReason

AGENT = str(Path(__file__).resolve().parent.parent / "fixtures" / "acp_agent.py")
TURNS = 50
WARMUP = 3
BLOCK = 10
STEP = 0.02
TURN = [{"usage": {"used": 1, "size": 1000}}] + [
    step for _ in range(500) for step in ({"text": "word ", "messageId": "m{turn}"}, {"sleep": STEP})
]


def delays(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.02, 0.12) for _ in range(WARMUP + TURNS)]


class CancelSink(StampSink):
    def __init__(self) -> None:
        super().__init__()
        self.streaming = trio.Event()

    async def context_usage(self, usage: Any) -> None:
        await super().context_usage(usage)
        self.streaming.set()


async def hive_turn(runtime: AcpRuntime, delay: float) -> float:
    sink = CancelSink()
    cancelled_at = 0.0

    async def cancel_soon() -> None:
        nonlocal cancelled_at
        await sink.streaming.wait()
        await trio.sleep(delay)
        cancelled_at = time.perf_counter()
        runtime.canceller().cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_soon)
        outcome = await runtime.run("go", sink)
        ended = time.perf_counter()
    if outcome.stop_reason is not StopReason.CANCELLED:
        raise RuntimeError(f"the turn was not cancelled: {outcome}")
    return ended - cancelled_at


def bare_turn(agent: RawAgent, session: str, delay: float) -> float:
    cancelled_at = 0.0

    def on_update(arrived: float, params: Any) -> None:
        nonlocal cancelled_at
        if not cancelled_at:
            time.sleep(delay)
            cancelled_at = agent.notify("session/cancel", {"sessionId": session})

    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    ended, answer = agent.wait(agent.request("session/prompt", prompt), on_update)
    if answer.get("stopReason") != "cancelled":
        raise RuntimeError(f"the prompt ended with {answer}")
    return ended - cancelled_at


def run() -> list[Figure]:
    samples: dict[str, list[float]] = {"hive": [], "bare": []}
    with scratch() as root:
        script = root / "script.json"
        script.write_text(json.dumps({"turns": [TURN], "on_cancel": "honour"}))
        env = {"FAKE_ACP_SCRIPT": str(script), "FAKE_ACP_MAX_SECONDS": "0"}
        agent = RawAgent([PYTHON, AGENT], {**os.environ, **env}, root, root / "bare.err")

        async def main_() -> None:
            spec = RuntimeSpec(backend=Backend.ACP, command=PYTHON, args=(AGENT,), env=tuple(env.items()))
            config = Config(cwd=root, compaction=CompactionPolicy(watermark=None))
            async with open_acp_runtime(spec, config) as runtime:
                init = {"protocolVersion": 1, "clientCapabilities": {}}
                agent.wait(agent.request("initialize", init))
                _, session = agent.wait(agent.request("session/new", {"cwd": str(root), "mcpServers": []}))
                hive_delays, bare_delays = delays(1), delays(2)
                for start in range(0, WARMUP + TURNS, BLOCK):
                    for delay in hive_delays[start : start + BLOCK]:
                        gc.collect()
                        samples["hive"].append(await hive_turn(runtime, delay) * 1000)
                    for delay in bare_delays[start : start + BLOCK]:
                        gc.collect()
                        took = await trio.to_thread.run_sync(bare_turn, agent, session["sessionId"], delay)
                        samples["bare"].append(took * 1000)

        try:
            trio.run(main_)
        finally:
            agent.close()
    stats = {name: summary(values[WARMUP:]) for name, values in samples.items()}
    extra = {"turns": TURNS, "stats_ms": stats, "samples_ms": samples}
    hive, bare = stats["hive"], stats["bare"]
    return [
        Figure("9 acp cancel", f"hive: cancel() → run() returned, median of {TURNS} (p90 {hive['p90']:.2f} ms)",
               hive["median"], "ms", bare["median"], f"bare: session/cancel → answer (p90 {bare['p90']:.2f} ms)",
               "", extra),
        Figure("9 acp cancel", "hive: cancel() → run() returned, p90", hive["p90"], "ms", bare["p90"], "bare p90"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
