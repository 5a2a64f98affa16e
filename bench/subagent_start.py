"""12. A subagent's start: ``start`` to the subagent's first stream line, against ``hive run``.

In one run, in alternation (3 warm-up rounds, then 20), medians:

- subagent: ``hive-subagent-mcp`` (the venv's console script) with its MCP handshake done and its
  daemon running (started by an earlier call, as after a parent's first turn): the time from
  writing a ``tools/call start(name=sN, prompt)`` line to its stdin until the subagent's turn log
  (``<state>/subagents/sN.jsonl``) holds its first line (looked at every 0.2 ms). Each sample
  waits for its turn to end (``status(name, wait_seconds=30)``) before the next starts.
- the floor: ``hive run PROMPT`` with ``HIVE_CLAUDE_COMMAND`` the same scripted agent, from just
  before its spawn to the first byte on its stdout (its first stream line).
- for context, the scripted agent itself, spawned directly as hive runs it, to its first byte.

Target: subagent / hive run <= 1.1x. For context, the cold start: the first ``start`` on a fresh
state directory, whose server starts the daemon (5 samples, each on a fresh state directory, the
daemon stopped after each), against the same hive run median.

The scripted agent is ``fixtures/fake_claude.py``'s default turn behind a ``claude`` wrapper.
"""

from __future__ import annotations

import compileall
import gc
import statistics
from pathlib import Path

from _common import BIN, Figure, StdioClient, main, scratch, summary
from _subagent import REPO, environment, fake_claude, first_line_after, server, wait_idle
from hive_run_overhead import spawn_to_exit

WARMUP = 3
ROUNDS = 20
COLD = 5
PROMPT = "Say hello."


def subagent_sample(client: StdioClient, state: Path, name: str) -> float:
    request = client.tool_request("start", name=name, prompt=PROMPT)
    started = client.send([request])
    took = first_line_after(state / "subagents" / f"{name}.jsonl", started)
    client.wait([request["id"]])
    wait_idle(client, name)
    return took


def hive_run_sample(env: dict[str, str], work: Path, stderr: Path) -> float:
    first, _, out, status = spawn_to_exit([str(BIN / "hive"), "run", PROMPT], env, work, stderr)
    if status != 0 or b'"type":"result"' not in out:
        raise RuntimeError(f"hive run: exit status {status}: {stderr.read_text()[-1500:]}")
    return first


def direct_sample(claude: Path, env: dict[str, str], work: Path, stderr: Path) -> float:
    argv = [str(claude), "--print", "--output-format", "stream-json", "--verbose", "--", PROMPT]
    first, _, _, status = spawn_to_exit(argv, env, work, stderr)
    if status != 0:
        raise RuntimeError(f"the scripted agent: exit status {status}")
    return first


def run() -> list[Figure]:
    compileall.compile_dir(REPO / "hive", quiet=1)
    warm: list[float] = []
    floor: list[float] = []
    cold: list[float] = []
    agent: list[float] = []
    with scratch() as root:
        claude = fake_claude(root)
        work = root / "work"
        work.mkdir()
        env = environment(root, claude)
        stderr = root / "stderr"
        state = Path(env["HIVE_STATE_DIR"])
        with server(root, env) as client:
            subagent_sample(client, state, "first")  # starts the daemon
            for round_ in range(WARMUP + ROUNDS):
                gc.collect()
                if round_ % 2 == 0:
                    subagent = subagent_sample(client, state, f"s{round_}")
                    hive_run = hive_run_sample(env, work, stderr)
                else:
                    hive_run = hive_run_sample(env, work, stderr)
                    subagent = subagent_sample(client, state, f"s{round_}")
                alone = direct_sample(claude, env, work, stderr)
                if round_ >= WARMUP:
                    agent.append(alone * 1000)
                    warm.append(subagent * 1000)
                    floor.append(hive_run * 1000)
        for index in range(COLD):
            fresh = root / f"cold-{index}"
            fresh.mkdir()
            cold_env = {**env, "HIVE_STATE_DIR": str(fresh / "state")}
            with server(fresh, cold_env) as client:
                cold.append(subagent_sample(client, fresh / "state", "c") * 1000)
    med_warm, med_floor = statistics.median(warm), statistics.median(floor)
    extra = {
        "subagent_ms": summary(warm),
        "hive_run_ms": summary(floor),
        "cold_ms": summary(cold),
        "agent_alone_ms": summary(agent),
    }
    return [
        Figure("12 subagent start", "`start` → the subagent's first stream line (daemon running) / `hive run` spawn → its first line",
               med_warm, "ms", med_floor, "hive run", "<= 1.1x", extra),
        Figure("12 subagent start", "context: the first `start` on a fresh state dir (the daemon started on first use) / `hive run`",
               statistics.median(cold), "ms", med_floor, "hive run"),
        Figure("12 subagent start", "context: `start` → first line / the scripted agent alone, spawned → its first line",
               med_warm, "ms", statistics.median(agent), "the agent alone"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
