"""The whole fleet under faults, checked against hive's promises (issue 38): a short seeded run
of `tests.scenario` (the long run is ``bench/fleet_soak.py``). A failure names its seed;
``HIVE_SCENARIO_SEED`` replays it."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

from tests.scenario.checks import check
from tests.scenario.fleet import run_fleet, unmount

SECONDS = 20.0
"""The operator's schedule; the run takes this, then its settling and its stop."""


async def test_a_fleet_under_faults_keeps_every_promise() -> None:
    seed = int(os.environ.get("HIVE_SCENARIO_SEED") or random.SystemRandom().randrange(1, 1_000_000))
    root = Path(tempfile.mkdtemp(prefix="hive-s-", dir="/tmp"))
    kept = False
    try:
        try:
            fleet = await run_fleet(seed, root, seconds=SECONDS)
        except Exception as exc:
            kept = True
            raise AssertionError(
                f"seed {seed}: the fleet's run failed: {exc!r} (its files are kept in {root})"
            ) from exc
        try:
            counts = check(fleet)
        except AssertionError as failed:
            kept = True
            raise AssertionError(f"{failed} (its files are kept in {root})") from failed
        finally:
            unmount(fleet, keep=kept)
        print(f"seed {seed}: {counts.line()}")
        assert counts.tasks > 0 and counts.turns > 0, f"seed {seed}: the fleet did nothing: {counts.line()}"
    finally:
        if not kept:
            shutil.rmtree(root, ignore_errors=True)
