"""The real-peer tier (``tests/real``) without its peers: on a developer's machine every test that
needs one skips and says which is missing; under ``CI=true`` none skips, each fails instead.

pytest runs ``tests/real`` in a subprocess with ``HIVE_PEERS_DIR`` at an empty directory (where
``.ci/install-peers`` would have put them), so no peer is found; only the tests of the fake API
alone run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.daemon import REPO

GUARD = 300


def run_real_tier(peers: Path, *, ci: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HIVE_REAL_CLAUDE", "HIVE_REAL_ACP")}
    env["HIVE_PEERS_DIR"] = str(peers)
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/real", "-rs", "-q", "-p", "no:cacheprovider", "-n", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    return done.stdout + done.stderr


def counts(output: str) -> dict[str, int]:
    """The closing line's counts: ``{"passed": 1, "skipped": 19, ...}``."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?)\b", output)}


def test_without_peers_every_skip_says_which_peer_is_missing(tmp_path: Path) -> None:
    output = run_real_tier(tmp_path, ci=False)
    found = counts(output)
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert found.get("skipped", 0) > 0 and "failed" not in found and "error" not in found, output
    for line in skips:  # at the test, saying what is missing and how to get it
        assert re.match(
            r"SKIPPED \[\d+\] tests/real/test_\w+\.py:\d+: the real (claude CLI|ACP agent) is not installed "
            r"\(.*\); run `bash \.ci/install-peers`",
            line,
        ), line
    assert sum(int(n) for n in re.findall(r"^SKIPPED \[(\d+)\]", output, re.M)) == found["skipped"]


def test_under_ci_no_test_skips_for_a_missing_peer(tmp_path: Path) -> None:
    output = run_real_tier(tmp_path, ci=True)
    found = counts(output)
    assert "skipped" not in found, output
    assert found.get("error", 0) + found.get("errors", 0) + found.get("failed", 0) > 0, output
    assert (
        "the real claude CLI is not installed" in output and "the real ACP agent is not installed" in output
    )
