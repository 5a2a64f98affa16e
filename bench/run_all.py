"""Run every benchmark, print one markdown table, and write the raw figures to bench/results/.

Usage, from the repository root: ``.venv/bin/python bench/run_all.py`` (exits 1 if a target is missed).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import acp_cancel
import acp_real
import acp_updates
import agent_burst
import agent_stop
import agent_turn_overhead
import agent_wake_to_turn
import big_output
import cli_cold_start
import concurrent_200
import daemon_refusal
import follow_output
import hive_run_overhead
import isolated_call
import passthrough
import relay_cold_start
import run_roundtrip
import spawn_cgroup
import subagent_start
import subagents_100
import tool_tokens
import wake_latency
import web_fleet
from _common import Figure, default_base, table

BENCHMARKS = [
    relay_cold_start,
    run_roundtrip,
    concurrent_200,
    big_output,
    wake_latency,
    passthrough,
    acp_updates,
    acp_real,
    acp_cancel,
    hive_run_overhead,
    cli_cold_start,
    subagent_start,
    subagents_100,
    agent_wake_to_turn,
    agent_burst,
    agent_turn_overhead,
    daemon_refusal,
    agent_stop,
    follow_output,
    web_fleet,
    tool_tokens,
    spawn_cgroup,
    isolated_call,
]
RESULTS = Path(__file__).resolve().parent / "results"


def machine(now: datetime.datetime, load: float) -> dict[str, object]:
    return {
        "date": now.isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_1min": load,
        "tmp": os.environ.get("HIVE_BENCH_TMP") or str(default_base()),
    }


def main() -> int:
    now = datetime.datetime.now().astimezone()
    load = os.getloadavg()[0]
    about = machine(now, load)
    figures: list[Figure] = []
    for bench in BENCHMARKS:
        started = time.monotonic()
        print(f"running {bench.__name__} ...", file=sys.stderr, flush=True)
        figures += bench.run()
        took, load_now = time.monotonic() - started, os.getloadavg()[0]
        print(f"  done in {took:.1f} s (load average {load_now:.2f})", file=sys.stderr, flush=True)
    print(
        f"{about['date']}, Python {about['python']}, {about['cpus']} CPUs, "
        f"load average {load:.2f} at the start, temp dirs under {about['tmp']}\n"
    )
    print(table(figures))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{now:%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps({"machine": about, "figures": [f.as_json() for f in figures]}, indent=2) + "\n")
    print(f"\nraw figures: {out}", file=sys.stderr)
    return 0 if all(f.passed is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
