"""Fixtures for running the real Claude Code CLI offline against the fake Anthropic API.

* ``real_claude``: the path of the pinned ``claude`` binary (``$HIVE_REAL_CLAUDE``, else
  ``.peers/bin/claude`` from ``.ci/install-peers``; ``$HIVE_PEERS_DIR`` instead of ``.peers``, as
  for the install). Missing: skipped on a developer's machine, saying why; an error when
  ``CI=true``.
* ``real_acp_agent``: claude-agent-acp (``$HIVE_REAL_ACP``, else ``.peers/bin/claude-agent-acp``),
  the same way.
* ``real_peer``: for a test parametrized on ``backend`` (``claude`` or ``acp``), that backend's
  real peer. A test on both backends asks for this rather than calling
  ``request.getfixturevalue`` in its body: pytest-trio 0.8 turns a skip raised inside an async
  test into a bare ``pytest.skip()``, and its reason is lost.
* ``fake_api``: a running ``fixtures/fake_anthropic_api.py`` for this test, with
  ``.port``, ``.base_url``, ``.set_scenario(dict)``, ``.requests(kind=None)``, ``.events()``.
* ``claude_home``: a scratch HOME with ``~/.claude/settings.json``.
* ``claude_env``: the environment for the CLI: that HOME, ``ANTHROPIC_BASE_URL`` at the fake,
  a fake key, no ``CLAUDECODE`` and nothing else that could send it off the machine.
* ``claude_workdir``: an empty working directory for the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fixtures.fake_api_control import (  # noqa: E402
    FakeApi,
    offline_claude_env,
    prepare_claude_home,
    running_fake_api,
)

PEERS = Path(os.environ.get("HIVE_PEERS_DIR") or REPO / ".peers")
PEERS_CLAUDE = PEERS / "bin" / "claude"
INSTALL_HINT = "run `bash .ci/install-peers` (or set HIVE_REAL_CLAUDE to a claude binary)"


def locate_real_claude() -> tuple[Path | None, str]:
    """The binary to use, or None and why not."""
    configured = os.environ.get("HIVE_REAL_CLAUDE")
    candidate = Path(configured) if configured else PEERS_CLAUDE
    where = f"HIVE_REAL_CLAUDE={candidate}" if configured else str(candidate)
    if not candidate.exists():
        return None, f"the real claude CLI is not installed ({where} does not exist); {INSTALL_HINT}"
    if not os.access(candidate, os.X_OK):
        return None, f"the real claude CLI at {where} is not executable; {INSTALL_HINT}"
    return candidate, ""


@pytest.fixture(scope="session")
def real_claude() -> Path:
    path, why = locate_real_claude()
    if path is None:
        if os.environ.get("CI") == "true" or os.environ.get("HIVE_REAL_CLAUDE"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{path} --version failed: {exc}", pytrace=False)
    if done.returncode != 0 or "Claude Code" not in done.stdout:
        pytest.fail(
            f"{path} --version gave {done.returncode}: {done.stdout!r} {done.stderr!r}", pytrace=False
        )
    return path


@pytest.fixture
async def fake_api(tmp_path: Path) -> AsyncIterator[FakeApi]:
    api_dir = tmp_path / "fake-api"
    api_dir.mkdir()
    async with running_fake_api(api_dir / "scenario.json", api_dir / "requests.jsonl") as api:
        yield api


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    return prepare_claude_home(tmp_path / "home")


@pytest.fixture
def claude_env(fake_api: FakeApi, claude_home: Path) -> dict[str, str]:
    return offline_claude_env(fake_api.port, claude_home)


@pytest.fixture
def claude_workdir(tmp_path: Path) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


PEERS_ACP = PEERS / "bin" / "claude-agent-acp"


@pytest.fixture(scope="session")
def real_acp_agent() -> Path:
    """claude-agent-acp, pinned by .ci/install-peers (``$HIVE_REAL_ACP`` overrides). Missing:
    skipped on a developer's machine, an error when ``CI=true``."""
    configured = os.environ.get("HIVE_REAL_ACP")
    path = Path(configured) if configured else PEERS_ACP
    if not (path.exists() and os.access(path, os.X_OK)):
        why = (
            f"the real ACP agent is not installed ({path} is missing or not executable); "
            "run `bash .ci/install-peers` (or set HIVE_REAL_ACP to the agent)"
        )
        if os.environ.get("CI") == "true" or configured:
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return path


PEER_FIXTURES = {"claude": "real_claude", "acp": "real_acp_agent"}


@pytest.fixture
def real_peer(request: pytest.FixtureRequest, backend: str) -> Path:
    """The real peer of the test's ``backend`` parameter, resolved while the test is set up (so
    that a missing peer's skip keeps its reason)."""
    path: Path = request.getfixturevalue(PEER_FIXTURES[backend])
    return path
