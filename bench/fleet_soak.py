"""23. The whole fleet under faults, for a long time (issue 38): the scenario runner of the suite
(`tests/scenario`) in rounds, each a fresh fleet of three agents with its own seed, until the
time asked for has passed; the counts of every invariant summed over the rounds.

    .venv/bin/python bench/fleet_soak.py [--minutes 30] [--round-minutes 5] [--seed N]

Each round: three ``hive-agent --with-bash-daemon`` (one with ``--subagents``) on the fake claude,
an operator prompting, watching (``hive bash status --wait``, ``tail -f``, ``stop``, a stop
through ``hive web``) and injecting faults (SIGKILL of a bash daemon, a subagent daemon or a
harness; a full disk under one agent's state), then the fleet let settle, stopped with SIGINT, and
checked. It prints a line per round and the totals as ``0 lost, 0 twice, 0 wrong of N``; every
broken invariant is printed with the seed that replays it (``HIVE_SCENARIO_SEED=N .venv/bin/python
-m pytest tests/test_scenario.py`` runs that seed's short run). A round that passed is removed; a
failed one's files are kept (the small disk's copied back where it was mounted), and the line
says where. Exits 1 if anything was broken.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.scenario.checks import Counts, verify
from tests.scenario.fleet import run_fleet, unmount


def leaves(exc: BaseException) -> str:
    """What went wrong, every leaf of an exception group said."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(leaves(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {str(exc)[:1500]}"


def soak_round(seed: int, seconds: float) -> tuple[Counts | None, list[str]]:
    """The round of ``seed`` run and checked: its counts (None: it did not run to its end) and
    what it broke. A round that passed leaves nothing; a failed one's files are kept, and where
    is printed."""
    root = Path(tempfile.mkdtemp(prefix="hive-soak-", dir="/tmp"))
    counts: Counts | None = None
    problems = ["its check did not end"]
    try:
        try:
            fleet = trio.run(partial(run_fleet, seed, root, seconds=seconds))
        except Exception as exc:
            problems = [f"the round failed: {leaves(exc)}"]
            return None, problems
        try:
            counts, problems = verify(fleet)
        finally:
            unmount(fleet, keep=bool(problems))
        return counts, problems
    finally:
        if counts is not None and not problems:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"seed {seed}: the round's files are kept in {root}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to run in all (default 30)")
    parser.add_argument("--round-minutes", type=float, default=5.0, help="each round's schedule (default 5)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000, help="the first round's seed")
    args = parser.parse_args()
    started = time.monotonic()
    totals: list[Counts] = []
    broken: list[str] = []
    seed = args.seed
    while time.monotonic() - started < args.minutes * 60:
        round_started = time.monotonic()
        counts, problems = soak_round(seed, args.round_minutes * 60)
        broken += [f"seed {seed}: {p}" for p in problems]
        if counts is None:
            print(broken[-1], flush=True)
        else:
            totals.append(counts)
            took = time.monotonic() - round_started
            print(f"round seed {seed} ({took:.0f} s): {counts.line()}; {len(problems)} broken", flush=True)
            for problem in problems:
                print(f"  seed {seed}: {problem}", flush=True)
        seed += 1
    ends = sum(c.tasks for c in totals)
    messages = sum(c.messages for c in totals)
    print(
        f"total over {(time.monotonic() - started) / 60:.1f} min, {len(totals)} rounds, "
        f"{sum(c.turns for c in totals)} turns:\n"
        f"  ends: {sum(c.ends_lost for c in totals)} lost, {sum(c.ends_twice for c in totals)} twice, "
        f"{sum(c.end_times_wrong for c in totals)} wrong of {ends}\n"
        f"  messages: {sum(c.messages_lost for c in totals)} lost, {sum(c.messages_twice for c in totals)} "
        f"twice of {messages}\n"
        f"  broken invariants: {len(broken)}"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
