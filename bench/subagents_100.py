"""13. 100 subagents started at once on a scripted agent: all finish, and what the daemon holds.

``hive-subagent-mcp`` with its handshake done and its daemon running (one subagent turn first), then
100 ``tools/call start(name=mN, prompt)`` lines written to its stdin in one write; 3 rounds. Per
round: the wall time until all 100 ``start`` answers have arrived (each answers at once, the turn
running in the background), and until every one of the 100 turns has ended (``status`` with
``wait_seconds=30``, which returns as any turn ends, until none is live), checked ``completed``.
The daemon's peak RSS (VmHWM) before the first round and after the last, and its CPU time per round.

The floor, for context: the same 100 scripted agents run directly, all spawned at once and each
read to its end (``subprocess.Popen`` from this process), once before each round.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import time
from pathlib import Path

from _common import Figure, StdioClient, cpu_seconds, main, proc_status_kb, scratch, structured, summary
from _subagent import daemon_pid, environment, fake_claude, server, wait_idle

COUNT = 100
ROUNDS = 3
PROMPT = "Say hello."


def direct(claude: Path, env: dict[str, str], work: Path) -> float:
    argv = [str(claude), "--print", "--output-format", "stream-json", "--verbose", "--", PROMPT]
    started = time.perf_counter()
    processes = [
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=work)
        for _ in range(COUNT)
    ]
    for process in processes:
        out, _ = process.communicate(timeout=120)
        if process.returncode != 0 or b'"type":"result"' not in out:
            raise RuntimeError(f"the scripted agent failed ({process.returncode})")
    return time.perf_counter() - started


def one_round(client: StdioClient, round_: int) -> tuple[float, float, float]:
    requests = [client.tool_request("start", name=f"m{round_}-{i}", prompt=PROMPT) for i in range(COUNT)]
    started = client.send(requests)
    answers = client.wait([r["id"] for r in requests])
    for _, answer in answers.values():
        structured(answer)  # a tool error raises
    answered = max(arrived for arrived, _ in answers.values()) - started
    typical = statistics.median(arrived for arrived, _ in answers.values()) - started
    sessions = [s for s in wait_idle(client) if s["name"].startswith(f"m{round_}-")]
    ended = time.perf_counter() - started
    done = [
        s for s in sessions if s["last_turn"]["stop_reason"] == "completed" and not s["last_turn"]["is_error"]
    ]
    if len(done) != COUNT:
        raise RuntimeError(f"{COUNT - len(done)} of {COUNT} subagent turns did not complete: {sessions[:3]}")
    return typical, answered, ended


def run() -> list[Figure]:
    answered: list[float] = []
    typical: list[float] = []
    ended: list[float] = []
    floor: list[float] = []
    cpu: list[float] = []
    with scratch() as root:
        claude = fake_claude(root)
        work = root / "work"
        work.mkdir()
        env = environment(root, claude)
        state = Path(env["HIVE_STATE_DIR"])
        with server(root, env) as client:
            request = client.tool_request("start", name="first", prompt=PROMPT)
            client.send([request])
            client.wait([request["id"]])
            wait_idle(client, "first")
            pid = daemon_pid(state)
            assert pid is not None
            peak_before = proc_status_kb(pid, "VmHWM") / 1024
            for round_ in range(ROUNDS):
                gc.collect()
                floor.append(direct(claude, env, work) * 1000)
                before = cpu_seconds(pid)
                t, a, e = one_round(client, round_)
                cpu.append((cpu_seconds(pid) - before) * 1000)
                typical.append(t * 1000)
                answered.append(a * 1000)
                ended.append(e * 1000)
            peak_after = proc_status_kb(pid, "VmHWM") / 1024
            rss_after = proc_status_kb(pid, "VmRSS") / 1024
    med_end, med_floor = statistics.median(ended), statistics.median(floor)
    extra = {
        "answered_ms": summary(answered),
        "median_answer_ms": summary(typical),
        "ended_ms": summary(ended),
        "direct_ms": summary(floor),
        "daemon_cpu_ms": cpu,
        "daemon_peak_rss_mb": [peak_before, peak_after],
        "daemon_rss_after_mb": rss_after,
    }
    return [
        Figure("13 100 subagents", f"{COUNT} `start` calls written at once → all {COUNT} answered", statistics.median(answered), "ms"),
        Figure("13 100 subagents", f"{COUNT} `start` calls written at once → the median one answered", statistics.median(typical), "ms"),
        Figure("13 100 subagents", f"→ all {COUNT} turns ended, each checked completed / the same 100 agents run directly",
               med_end, "ms", med_floor, "100 agents direct", "", extra),
        Figure("13 100 subagents", f"the daemon's CPU time per {COUNT} turns", statistics.median(cpu), "ms"),
        Figure("13 100 subagents", f"the daemon's peak RSS before → after {COUNT * ROUNDS} turns",
               peak_after, "MB", peak_before, "before"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
