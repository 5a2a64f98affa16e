"""16. A turn through ``hive-agent`` against a turn through ``hive run``, on the same scripted agent.

In one run, in alternation (the order rotated every round; 3 warm-up rounds, then 20), medians:

- hive-agent: ``hive-agent --with-bash-daemon`` running, idle; the time from writing an operator
  message (``prompt``) to its agent socket until the turn's record is in its turn log (looked at
  every 0.2 ms): the queue's append and sync, the turn, the log.
- the floor: ``hive run PROMPT``, from just before its spawn to its exit (stdout read to EOF).
- for context, the agent alone: the fake claude spawned directly with the argv hive gives it
  (``--print --output-format stream-json --verbose -- PROMPT``), spawn to exit.

The scripted agent is ``fixtures/fake_claude.py``'s default turn (init, one text block, a
result), spawned per turn by both (``HIVE_RUNTIME=claude``). Target: hive-agent / hive run
<= 1.05x. For context, the same with the scripted ACP agent (``fixtures/acp_agent.py``'s default
turn), which ``hive-agent`` keeps running across turns while ``hive run`` starts it for each.
"""

from __future__ import annotations

import compileall
import gc
import time
from pathlib import Path

from _agent import REPO, Agent, acp_env, claude_env, prompt, running_agent, wait_turns
from _common import BIN, Figure, main, scratch, summary
from hive_run_overhead import spawn_to_exit

WARMUP = 3
ROUNDS = 20
PROMPT = "Say hello."


def agent_turn(agent: Agent, done: int) -> float:
    """One operator message, until its turn is logged (``done`` turns were before it)."""
    started = prompt(agent.socket, PROMPT)
    wait_turns(agent, done + 1)
    return time.perf_counter() - started


def hive_run_turn(env: dict[str, str], work: Path, stderr: Path) -> float:
    _, took, out, status = spawn_to_exit([str(BIN / "hive"), "run", PROMPT], env, work, stderr)
    if status != 0 or b'"type":"result"' not in out:
        raise RuntimeError(f"hive run: exit status {status}: {stderr.read_text()[-1500:]}")
    return took


def direct_turn(env: dict[str, str], work: Path, stderr: Path) -> float:
    """The fake claude run as hive runs it, spawn to exit."""
    argv = [
        env["HIVE_CLAUDE_COMMAND"],
        "--print",
        "--output-format",
        "stream-json",
        "--verbose",
        "--",
        PROMPT,
    ]
    _, took, out, status = spawn_to_exit(argv, env, work, stderr)
    if status != 0 or b'"type":"result"' not in out:
        raise RuntimeError(f"claude: exit status {status}: {stderr.read_text()[-1500:]}")
    return took


def compare(root: Path, env: dict[str, str], *, direct: bool) -> dict[str, list[float]]:
    """The arms' samples (ms), in an order rotated every round."""
    work = root / "work"
    work.mkdir()
    samples: dict[str, list[float]] = {"hive_agent": [], "hive_run": [], "direct": []}
    with running_agent(root, env) as agent:
        for round_ in range(WARMUP + ROUNDS):
            arms = {
                "hive_agent": lambda: agent_turn(agent, round_),  # noqa: B023 (called in this round)
                "hive_run": lambda: hive_run_turn(env, work, root / "run.err"),
            }
            if direct:
                arms["direct"] = lambda: direct_turn(env, work, root / "direct.err")
            names = list(arms)
            names = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in names:
                gc.collect()
                took = arms[name]()
                if round_ >= WARMUP:
                    samples[name].append(took * 1000)
    return samples


def run() -> list[Figure]:
    compileall.compile_dir(REPO / "hive", quiet=1)
    with scratch() as root:
        claude_root, acp_root = root / "claude", root / "acp"
        claude_root.mkdir()
        acp_root.mkdir()
        claude = compare(claude_root, claude_env(claude_root), direct=True)
        acp = compare(acp_root, acp_env(acp_root), direct=False)
    ca, cr, cd = (summary(claude[arm]) for arm in ("hive_agent", "hive_run", "direct"))
    aa, ar = (summary(acp[arm]) for arm in ("hive_agent", "hive_run"))
    return [
        Figure(
            "16 turn overhead",
            f"claude (fake, spawned per turn): prompt on the agent socket → turn logged (median of {ROUNDS}; "
            f"p90 {ca['p90']:.0f} ms)",
            ca["median"],
            "ms",
            cr["median"],
            "hive run, spawn → exit",
            "<= 1.05x",
            {"hive_agent": ca, "hive_run": cr},
        ),
        Figure(
            "16 turn overhead",
            f"claude: the same, against the fake claude spawned directly as hive spawns it (added "
            f"{ca['median'] - cd['median']:.1f} ms)",
            ca["median"],
            "ms",
            cd["median"],
            "claude direct, spawn → exit",
            "",
            {"hive_agent": ca, "direct": cd},
        ),
        Figure(
            "16 turn overhead",
            f"ACP (fake; hive-agent keeps it, hive run starts it): the same (median of {ROUNDS})",
            aa["median"],
            "ms",
            ar["median"],
            "hive run, spawn → exit",
            "",
            {"hive_agent": aa, "hive_run": ar},
        ),
    ]


if __name__ == "__main__":
    main(run)
