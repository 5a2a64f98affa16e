"""Shared fixtures: short temporary directories, a real daemon's paths, an agent socket, the fake
claude, the fakes and state directory of subagents.

The helpers they are built on, and every other helper the tests share, are in ``tests/helpers``.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.claude_fake import FakeClaude
from tests.helpers.daemon import DaemonHandle, remove_task_cgroups, shared_daemon, short_tmp_dir
from tests.helpers.forked_daemon import ForkedDaemonHandle
from tests.helpers.harness import installed_fake, scratch_root
from tests.helpers.listener import AgentListener
from tests.helpers.subagents import World, stop_daemon, world_in

# A test run started with SIGINT ignored (a background job of a script, `nohup ... &`) would pass
# that on to every process the tests start, which SIGINT then never stops: the tests would wait
# forever for what every stop promises. A handler, unlike an ignored signal, is not inherited.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# One Hypothesis profile for the suite: no deadline per example, and no health check on slow data
# generation. The suite runs on loaded laptops and on two busy cores in CI, where an example's time
# says nothing about the code; a deadline there fails a test by chance. (A test's own `fail_after`
# still guards against a hang.)
settings.register_profile("hive", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("hive")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default in pyproject.toml): a worker per core the suite may use, and one
    more, since most tests spend much of their time waiting on the real processes they start."""
    return len(os.sched_getaffinity(0)) + 1


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Unix socket paths are limited to 107 bytes."""
    path = short_tmp_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "forked_daemon: the `daemon` fixture forks its daemon from the zygote"
        " (tests.helpers.forked_daemon): a restart costs a fork, not the imports",
    )
    config.addinivalue_line(
        "markers",
        "kill_at_end(*events): the `root` fixture SIGKILLs at its end only the agents the fakes"
        " recorded with these events (all it started and spawned, unmarked)",
    )


@pytest.fixture
def daemon(request: pytest.FixtureRequest, short_tmp: Path) -> Iterator[DaemonHandle]:
    """The paths of a daemon under ``short_tmp`` (started by the test with ``daemon.running()``),
    forked from the zygote in a module marked ``forked_daemon``."""
    forked = request.node.get_closest_marker("forked_daemon") is not None
    handle = (ForkedDaemonHandle if forked else DaemonHandle).under(short_tmp)
    yield handle
    remove_task_cgroups(handle.state_dir)


@pytest.fixture
def agent(daemon: DaemonHandle) -> AgentListener:
    """A stand-in for the harness on the daemon's agent socket (served with ``agent.serving()``)."""
    return AgentListener(daemon.agent_socket)


@pytest.fixture(scope="module")
def served() -> Iterator[DaemonHandle]:
    """One real daemon (no agent socket) for the tests of a module that each need only one that
    serves: they share its state, so each uses task names of its own and asserts only about its
    own tasks and connections."""
    with shared_daemon() as handle:
        yield handle


@pytest.fixture
def root(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A short scratch directory for a harness and its agents (``scratch_root``: the agents the
    fakes recorded are SIGKILLed at its end; in a module marked ``kill_at_end``, only those
    recorded with its events)."""
    marker = request.node.get_closest_marker("kill_at_end")
    with scratch_root("hive-r-", *([marker.args] if marker else [])) as path:
        yield path


@pytest.fixture
def fake(root: Path) -> Iterator[FakeClaude]:
    """The fake claude, installed in ``root``; whatever it left running is stopped at the end."""
    with installed_fake(root) as claude:
        yield claude


@pytest.fixture
async def world(short_tmp: Path) -> AsyncIterator[World]:
    """Subagents' fakes and state directory under ``short_tmp``; at the end, the fakes left running
    are stopped, and so is a subagent daemon a test's tool call started on first use."""
    with world_in(short_tmp) as made:
        try:
            yield made
        finally:
            await stop_daemon(made.state)
