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
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from fixtures import acp_agent, fake_claude
from hive.agent._orphans import (
    AGENTS_FILE,
    DAEMON_FILE,
    PreviousStillRunning,
    ProcessRecord,
    Recorded,
    stop_previous,
)
from hive.agent_socket import Wake, send_wake
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.daemon import DaemonHandle
from tests.helpers.harness import HOLD, acp_env, claude_env, claude_start, running_agent
from tests.helpers.processes import wait_exited

GUARD = 60


pytestmark = pytest.mark.kill_at_end("start")


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


def only_sigint(signals: list[str]) -> bool:
    """Whether an agent got SIGINT and nothing else. The kernel sends the parent-death signal as
    the agent is handed to each of its dying harness's threads in turn: more than one may come."""
    return bool(signals) and set(signals) == {"SIGINT"}


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
    assert only_sigint([e["signal"] for e in acp_events(root, "signal")])


def claude_behind_a_wrapper(fake: FakeClaude) -> dict[str, str]:
    """``HIVE_CLAUDE_COMMAND`` a shell script that runs the fake claude without ``exec``: the
    shell is the agent's first process, and waits on claude as its foreground child."""
    wrapper = fake.root / "claude-wrapper"
    wrapper.write_text(f'#!/bin/sh\n{sys.executable} {fake_claude.PATH} "$@"\nexit $?\n')
    wrapper.chmod(0o755)
    return {**claude_env(fake), "HIVE_CLAUDE_COMMAND": str(wrapper)}


@pytest.mark.parametrize(
    "env", [claude_env, claude_behind_a_wrapper], ids=["exec'd", "behind a wrapper script"]
)
async def test_a_sigkilled_harness_s_claude_gets_sigint_and_exits(
    root: Path, fake: FakeClaude, env: Callable[[FakeClaude], dict[str, str]]
) -> None:
    fake.script(HOLD)
    with trio.fail_after(GUARD):
        async with running_agent(root, env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-a", "1"))
            start = await claude_start(fake, 1)
            agent.process.kill()
            await agent.process.wait()
        await wait_exited(start["pid"])
    assert only_sigint(fake.signals())


async def test_a_harness_restarted_at_once_after_a_sigkill_neither_waits_on_nor_overlaps_a_wrapped_claude(
    root: Path,
) -> None:
    fake = FakeClaude(root).install()
    try:
        fake.script(HOLD, [{"init": {}}, {"text": "again"}, {"result": {}}])
        env = claude_behind_a_wrapper(fake)
        with trio.fail_after(GUARD):
            async with running_agent(root, env) as agent:
                await send_wake(agent.socket, Wake("bash-task-a", "1"))
                start = await claude_start(fake, 1)
                left = os.pidfd_open(start["pid"])
                agent.process.kill()
                await agent.process.wait()
            try:
                async with running_agent(root, env):
                    assert exited(left)  # gone before the new harness was ready
            finally:
                os.close(left)
        assert only_sigint(fake.signals())
    finally:
        fake.cleanup()


async def test_a_restarted_harness_sigints_the_agent_its_predecessor_left_and_waits_for_it(
    root: Path,
) -> None:
    """The previous agent takes a while to go after SIGINT: the new harness is ready (and its
    agent started) only once it has gone."""
    marker = root / "sigint"
    left = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-c",
            "import os, signal, sys, time\n"
            "def stop(*_):\n"
            f"    open({str(marker)!r}, 'w').close(); time.sleep(0.3); os._exit(0)\n"
            "signal.signal(signal.SIGINT, stop)\n"
            "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
            "while True: signal.pause()\n",
        ],
        stdout=-1,
    )
    assert left.stdout is not None
    assert await left.stdout.receive_some() == b"ready\n"
    # Also recorded: a pid that is another process's now (its start time differs): left alone.
    other = await trio.lowlevel.open_process([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    (root / "state").mkdir(mode=0o700)
    recorded, reused = Recorded.of(left.pid, "an-agent"), Recorded.of(other.pid, "an-agent")
    assert recorded is not None and reused is not None
    reused = Recorded(reused.pid, reused.start_time - 1, reused.name)
    ProcessRecord(root / "state" / AGENTS_FILE).save([reused, recorded])
    pidfd = os.pidfd_open(left.pid)
    try:
        with trio.fail_after(GUARD):
            async with running_agent(root, acp_env(root, ["default"])) as agent:
                assert marker.exists()
                assert exited(pidfd)
                new_agent = acp_events(root, "start")[0]
            assert await left.wait() == 0
            assert other.returncode is None
            assert other.stdin is not None
            await other.stdin.aclose()
            assert await other.wait() == 0
        # It started after the previous one's exit, 0.3 s after its SIGINT (coarse file times: 10 ms).
        assert new_agent["ts"] >= marker.stat().st_mtime + 0.29
        assert f"an-agent (pid {left.pid}), left running by a previous hive-agent" in agent.stderr()
        # The new agent is what the state dir records now.
        assert [r.pid for r in ProcessRecord(root / "state" / AGENTS_FILE).load()] == [new_agent["pid"]]
    finally:
        os.close(pidfd)
        for process in (left, other):
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_a_restarted_harness_sigints_the_whole_process_group_of_an_agent_left_running(
    root: Path,
) -> None:
    """A recorded agent leads its process group, as when a turn is stopped: what runs in it (the
    claude a wrapper script runs without exec, waiting on it) gets the SIGINT too."""
    marker = root / "sigint"
    claude = (
        "import signal, sys\n"
        f"def stop(*_): open({str(marker)!r}, 'w').close(); sys.exit(0)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        "while True: signal.pause()\n"
    )
    wrapper = await trio.lowlevel.open_process(
        ["/bin/sh", "-c", f'{sys.executable} -c "$1"; exit $?', "claude-wrapper", claude],
        stdout=-1,
        start_new_session=True,
    )
    try:
        assert wrapper.stdout is not None
        assert await wrapper.stdout.receive_some() == b"ready\n"
        recorded = Recorded.of(wrapper.pid, "claude-wrapper")
        assert recorded is not None
        ProcessRecord(root / AGENTS_FILE).save([recorded])
        with trio.fail_after(GUARD):
            await stop_previous(ProcessRecord(root / AGENTS_FILE), within=10, groups=True)
        assert marker.exists()
        assert wrapper.returncode is not None
    finally:
        if wrapper.returncode is None:
            os.killpg(wrapper.pid, signal.SIGKILL)
            await wrapper.wait()


async def test_a_sigkilled_harness_s_bash_daemon_gets_sigint_and_exits_quietly(root: Path) -> None:
    with trio.fail_after(GUARD):
        async with running_agent(root, acp_env(root, ["default"]), "--with-bash-daemon") as agent:
            pid = daemon_pid(agent.stderr())
            assert os.getpgid(pid) == pid != os.getpgid(agent.process.pid)
            agent.process.kill()
            await agent.process.wait()
        await wait_exited(pid)
    assert "hive-bash-daemon: INFO: SIGINT: stopping" in agent.stderr()
    assert "Traceback" not in agent.stderr()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_to_the_harness_s_group_stops_it_and_its_daemon_once_without_a_traceback(
    root: Path, signum: signal.Signals
) -> None:
    """A terminal's Ctrl-C (or SIGTERM to the job) reaches the harness alone; the daemon gets the
    harness's SIGINT, once."""
    with trio.fail_after(GUARD):
        async with running_agent(
            root, acp_env(root, ["default"]), "--with-bash-daemon", new_session=True
        ) as agent:
            pid = daemon_pid(agent.stderr())
            assert os.getpgid(pid) != agent.process.pid  # the harness leads its group
            pidfd = os.pidfd_open(pid)
            try:
                os.killpg(agent.process.pid, signum)
                assert await agent.process.wait() == 0, agent.stderr()
                assert exited(pidfd)  # the harness waited for it
            finally:
                os.close(pidfd)
    stderr = agent.stderr()
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stderr.count("hive-bash-daemon: INFO: SIGINT: stopping") == 1, stderr
    assert "hive-bash-daemon: INFO: SIGTERM" not in stderr


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM)])
async def test_the_daemon_stops_on_sigint_or_sigterm_and_on_more_of_them_without_a_traceback(
    daemon: DaemonHandle, signals: tuple[signal.Signals, ...]
) -> None:
    with trio.fail_after(GUARD):
        async with daemon.running(stop=False) as process:
            for signum in signals:
                process.send_signal(signum)
            assert await process.wait() == 0, daemon.stderr_text()
    assert "Traceback" not in daemon.stderr_text(), daemon.stderr_text()
    assert daemon.stderr_text().count(": stopping;") == 1, daemon.stderr_text()


async def test_a_restarted_harness_stops_the_daemon_its_predecessor_left_and_starts_its_own(
    root: Path, daemon: DaemonHandle
) -> None:
    """A daemon the state dir records, still running and answering on the bash socket, is not
    reused: it gets SIGINT and is waited for, and the harness starts the daemon it owns."""
    daemon.state_dir = root / "state"
    daemon.socket = root / "state" / "bash.sock"
    daemon.agent_socket = root / "state" / "agent.sock"
    daemon.root = root
    with trio.fail_after(GUARD):
        async with daemon.running(stop=False) as left:
            recorded = Recorded.of(left.pid, "hive-bash-daemon")
            assert recorded is not None
            ProcessRecord(root / "state" / DAEMON_FILE).save([recorded])
            async with running_agent(root, acp_env(root, ["default"]), "--with-bash-daemon") as agent:
                assert left.returncode is not None  # stopped before the new daemon started
                own = daemon_pid(agent.stderr())
            assert own != left.pid
            await wait_exited(own)
    assert f"hive-bash-daemon (pid {left.pid}), left running by a previous hive-agent" in agent.stderr()
    assert "SIGINT: stopping" in daemon.stderr_text()
    assert "Traceback" not in daemon.stderr_text() + agent.stderr()


async def test_a_previous_agent_that_ignores_sigint_is_named_in_an_error_saying_what_to_do(
    root: Path,
) -> None:
    stubborn = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-c",
            "import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()\n",
        ],
        stdin=-1,
        stdout=-1,
    )
    assert stubborn.stdout is not None and stubborn.stdin is not None
    try:
        assert await stubborn.stdout.receive_some() == b"ready\n"
        recorded = Recorded.of(stubborn.pid, "an-agent")
        assert recorded is not None
        record = ProcessRecord(root / AGENTS_FILE)
        record.save([recorded])
        with pytest.raises(PreviousStillRunning) as raised:
            await stop_previous(record, within=0.2)
        assert f"an-agent (pid {stubborn.pid})" in str(raised.value)
        assert f"stop it (kill {stubborn.pid}) and start hive-agent again" in str(raised.value)
        assert stubborn.returncode is None
    finally:
        await stubborn.stdin.aclose()
        await stubborn.wait()
