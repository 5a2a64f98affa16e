"""An agent, and the bash daemon ``--with-bash-daemon`` starts, do not outlive their harness.

Real processes: a ``hive-agent`` SIGKILLed (the fault under test), its agent and daemon sent
SIGINT by the kernel (``PR_SET_PDEATHSIG``) and their exits awaited on pidfds; a harness
restarted over a state dir whose recorded agent or daemon still runs; the daemon in a process
group of its own, and quiet on SIGINT and SIGTERM. ``GUARD`` only bounds a failure.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import trio

from fixtures import acp_agent
from hive.wake import Wake, send_wake
from tests.claude_fake import FakeClaude, wait_exited
from tests.test_agent_harness import HOLD, acp_env, claude_env, claude_start, running_agent

GUARD = 60


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="hive-l-", dir="/tmp"))
    try:
        yield path
    finally:
        for record in (path / "acp-record.jsonl", path / "record.jsonl"):
            for event in acp_agent.read_record(record):
                if event["event"] == "start":
                    with suppress(ProcessLookupError):
                        os.kill(event["pid"], signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


def lingering_acp_env(root: Path) -> dict[str, str]:
    """An ACP agent that stays after its stdin's EOF (only a signal ends it)."""
    env = acp_env(root, ["default"])
    script = json.loads((root / "acp-script.json").read_text())
    script["on_eof"] = "linger"
    (root / "acp-script.json").write_text(json.dumps(script))
    return env


def acp_events(root: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == kind]


def daemon_pid(stderr: str) -> int:
    found = re.search(r"started hive-bash-daemon \(pid (\d+)\)", stderr)
    assert found, stderr
    return int(found[1])


def exited(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


async def test_a_sigkilled_harness_s_acp_agent_that_ignores_stdin_eof_gets_sigint_and_exits(
    root: Path,
) -> None:
    with trio.fail_after(GUARD):
        async with running_agent(root, lingering_acp_env(root)) as agent:
            pid = int(acp_events(root, "start")[0]["pid"])
            agent.process.kill()  # the crash is the point
            await agent.process.wait()
        await wait_exited(pid)
    assert [e["signal"] for e in acp_events(root, "signal")] == ["SIGINT"]


async def test_a_sigkilled_harness_s_claude_gets_sigint_and_exits(root: Path) -> None:
    fake = FakeClaude(root).install()
    try:
        fake.script(HOLD)
        with trio.fail_after(GUARD):
            async with running_agent(root, claude_env(fake)) as agent:
                await send_wake(agent.socket, Wake("bash-task-a", "1"))
                start = await claude_start(fake, 1)
                agent.process.kill()
                await agent.process.wait()
            await wait_exited(start["pid"])
        assert fake.signals() == ["SIGINT"]
    finally:
        fake.cleanup()
