"""8. hive's overhead on a real ACP agent: claude-agent-acp on the fake Anthropic API (text mode).

The agent is ``.peers/bin/claude-agent-acp`` (``bash .ci/install-peers``; ``$HIVE_REAL_ACP``
overrides it); missing, the benchmark is skipped. One fake API (``fixtures/fake_api_control.py``,
scenario ``{"mode": "text"}``) serves every run; each run has a fresh scratch HOME with
``~/.claude/settings.json`` (permissions ``default``) and the offline environment of
``offline_claude_env`` (ANTHROPIC_BASE_URL at the fake, a fake key,
CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_AUTOUPDATER=1, IS_SANDBOX=1, ...). Measured in
alternation (1 warm-up pair, then 5 pairs, the order swapped every round), medians:

- hive: ``open_acp_runtime`` (spawn, ``initialize``, checks) and one ``run``: spawn to the block
  being entered (``initialize`` answered), and spawn to ``run`` returning (the first turn's end,
  ``session/new`` and ``session/prompt`` included).
- bare driver: ``_acp.RawAgent``, the same requests by hand with ``subprocess`` (a permission
  request would be answered with its allow option): spawn to the ``initialize`` answer's line,
  and spawn to the prompt answer's line.

After each run the agent's process group gets SIGINT and the next run waits until the whole
group (the agent's ``claude`` child too) is gone.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import trio
from _acp import RawAgent, StampSink, wait_group_gone
from _common import Figure, main, scratch, summary

from hive.acp import open_acp_runtime
from hive.runtime import Backend, Config, RuntimeSpec, StopReason

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fixtures.fake_api_control import fake_api, offline_claude_env, prepare_claude_home  # noqa: E402

AGENT = Path(os.environ.get("HIVE_REAL_ACP") or REPO / ".peers" / "bin" / "claude-agent-acp")
ROUNDS = 5
PROMPT = "Say hello."
SCENARIO = {"mode": "text", "text": "Hello from the fake API."}


@contextlib.contextmanager
def clean_environ() -> Iterator[None]:
    """hive starts an agent with this process's environment under the spec's: keep nothing in it
    that could send the agent elsewhere (the bare driver gets the same environment)."""
    dropped = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k.startswith(("CLAUDE", "ANTHROPIC")) or k.lower() in ("http_proxy", "https_proxy", "all_proxy")
    }
    try:
        yield
    finally:
        os.environ.update(dropped)


def hive(work: Path, env: dict[str, str]) -> tuple[float, float, float]:
    async def session() -> tuple[float, float, int]:
        spec = RuntimeSpec(backend=Backend.ACP, command=str(AGENT), env=tuple(env.items()))
        sink = StampSink()
        started = time.perf_counter()
        async with open_acp_runtime(spec, Config(cwd=work)) as runtime:
            ready = time.perf_counter()
            outcome = await runtime.run(PROMPT, sink)
            ended = time.perf_counter()
            pid = runtime.agent_pid
        if outcome.stop_reason is not StopReason.COMPLETED or outcome.is_error or pid is None:
            raise RuntimeError(f"the turn did not complete: {outcome}")
        return ready - started, ended - started, pid

    cpu = time.process_time()
    initialized, ended, pid = trio.run(session)
    cpu = time.process_time() - cpu
    wait_group_gone(pid)
    return initialized, ended, cpu


def bare(work: Path, env: dict[str, str], stderr: Path) -> tuple[float, float, float]:
    cpu = time.process_time()
    agent = RawAgent([str(AGENT)], {**os.environ, **env}, work, stderr)
    try:
        client = {
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        initialized, _ = agent.wait(agent.request("initialize", client))
        _, session = agent.wait(agent.request("session/new", {"cwd": str(work), "mcpServers": []}))
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": PROMPT}]}
        ended, answer = agent.wait(agent.request("session/prompt", prompt))
        cpu = time.process_time() - cpu
    finally:
        agent.close()
    if answer.get("stopReason") != "end_turn":
        raise RuntimeError(f"the prompt ended with {answer}")
    return initialized - agent.spawned, ended - agent.spawned, cpu


def run() -> list[Figure]:
    if not os.access(AGENT, os.X_OK):
        why = f"skipped: the real agent is not installed ({AGENT}); run `bash .ci/install-peers`"
        print(f"  {why}", file=sys.stderr)
        return [Figure("8 acp real agent", why, float("nan"), "")]
    samples: dict[str, list[float]] = {
        f"{who}_{what}": [] for who in ("hive", "bare") for what in ("init", "turn", "cpu")
    }
    with scratch() as root, clean_environ():
        work = root / "work"
        work.mkdir()
        with fake_api(root / "scenario.json", root / "api.jsonl", scenario=SCENARIO) as api:
            for round_ in range(ROUNDS + 1):  # the first round warms up and is not counted
                order = ("hive", "bare") if round_ % 2 == 0 else ("bare", "hive")
                for name in order:
                    env = offline_claude_env(api.port, prepare_claude_home(root / f"home-{round_}-{name}"))
                    gc.collect()
                    measured = hive(work, env) if name == "hive" else bare(work, env, root / "agent.err")
                    if round_:
                        for what, took in zip(("init", "turn", "cpu"), measured, strict=True):
                            samples[f"{name}_{what}"].append(took * 1000)
    med = {name: summary(values)["median"] for name, values in samples.items()}
    extra = {"agent": str(AGENT), "samples_ms": samples}
    return [
        Figure("8 acp real agent", "claude-agent-acp: spawn → initialize answered, through hive", med["hive_init"],
               "ms", med["bare_init"], "bare driver", "<= 1.05x", extra),
        Figure("8 acp real agent", "claude-agent-acp: spawn → first turn's end, through hive", med["hive_turn"],
               "ms", med["bare_turn"], "bare driver", "<= 1.05x"),
        Figure("8 acp real agent", "the client's own CPU time for that session: hive", med["hive_cpu"],
               "ms", med["bare_cpu"], "bare driver"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
