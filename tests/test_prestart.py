"""An agent spawned before Trio (``hive run``'s prestart): adopted only for exactly its command,
and sent SIGINT, never more, when nobody adopts it or a signal comes before Trio took them over."""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import hive.hive_run
from hive.acp import agent_command
from hive.cli import build_parser
from hive.runtime import prestart, release_prestarted, start_agent
from hive.runtime._prestart import AgentCommand, Prestart, Spawned, interrupt_unclaimed, unclaimed
from tests.helpers.acp_fake import FakeAcp
from tests.helpers.inotify import wait_until_blocking
from tests.helpers.processes import wait_exited

GUARD = 30


@pytest.fixture
def agent(short_tmp: Path) -> Iterator[FakeAcp]:
    fake = FakeAcp(short_tmp)
    fake.script("default")
    try:
        yield fake
    finally:
        interrupt_unclaimed()
        fake.cleanup()


def command_of(agent: FakeAcp) -> AgentCommand:
    return agent_command(agent.spec(), agent.config())


async def test_start_agent_adopts_the_prestarted_agent_for_exactly_its_command(agent: FakeAcp) -> None:
    command = command_of(agent)
    waiting = prestart(command, cwd=agent.root)
    assert waiting is not None
    with trio.fail_after(GUARD):
        adopted = await start_agent(command.argv, cwd=agent.root, env=command.env, stdin_pipe=True)
        assert adopted.pid == waiting.spawned.popen.pid
        assert unclaimed() == []
        # Its own handlers first: a SIGINT before them is the interpreter's, and ignored outright
        # where the test process was started with SIGINT ignored (a job in the background of a
        # non-interactive shell), which the child inherits.
        await agent.wait_for_event("start")
        adopted.interrupt()
        await adopted.wait()
    assert agent.signals() == ["SIGINT"]


@pytest.mark.parametrize("differs", ["argv", "env", "cwd", "stdin", "stdin_data"])
def test_a_prestarted_agent_matches_only_its_own_command(tmp_path: Path, differs: str) -> None:
    command = AgentCommand(("agent", "--flag"), {"A": "1"}, stdin_pipe=True)
    waiting = Prestart(Spawned(None, command.argv, None, -1, -1), tmp_path, command)  # type: ignore[arg-type]
    assert waiting.matches(tmp_path, AgentCommand(("agent", "--flag"), {"A": "1"}, stdin_pipe=True))
    other = {
        "argv": (AgentCommand(("agent",), {"A": "1"}, stdin_pipe=True), tmp_path),
        "env": (AgentCommand(command.argv, {"A": "2"}, stdin_pipe=True), tmp_path),
        "cwd": (command, tmp_path / "elsewhere"),
        "stdin": (AgentCommand(command.argv, {"A": "1"}, stdin_pipe=False), tmp_path),
        "stdin_data": (
            AgentCommand(command.argv, {"A": "1"}, stdin_pipe=True, stdin_data=b"a prompt"),
            tmp_path,
        ),
    }[differs]
    assert not waiting.matches(other[1], other[0])


async def test_a_different_command_spawns_its_own_and_the_prestarted_one_gets_sigint(agent: FakeAcp) -> None:
    command = command_of(agent)
    waiting = prestart(command, cwd=agent.root)
    assert waiting is not None
    elsewhere = FakeAcp(agent.state)
    agent.state.mkdir()
    elsewhere.script("default")
    other_command = command_of(elsewhere)  # its own record: the environment differs
    with trio.fail_after(GUARD):
        other = await start_agent(other_command.argv, cwd=agent.root, env=other_command.env, stdin_pipe=True)
        assert other.pid != waiting.spawned.popen.pid
        await agent.wait_for_event("start")  # the prestarted agent's handlers are in place
        await release_prestarted(10)
        await wait_exited(waiting.spawned.popen.pid)
        await elsewhere.wait_for_event("start")
        other.interrupt()
        await other.wait()
    assert agent.pids() == [waiting.spawned.popen.pid]
    assert agent.signals() == ["SIGINT"]
    assert elsewhere.signals() == ["SIGINT"]


def wait_for_start(agent: FakeAcp) -> None:
    """The fake's own record that its signal handlers are installed (another process's file,
    read again whenever its directory changes; bounded by GUARD)."""
    try:
        wait_until_blocking(lambda: agent.events("start"), agent.record_path.parent, timeout=GUARD)
    except TimeoutError:
        raise AssertionError("the prestarted agent never started") from None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_before_trio_takes_over_sigints_the_agent_already_spawned(
    agent: FakeAcp, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], signum: signal.Signals
) -> None:
    spec = agent.spec()
    monkeypatch.setenv("HIVE_RUNTIME", "acp")
    monkeypatch.setenv("HIVE_ACP_COMMAND", str(spec.command))
    monkeypatch.setenv("HIVE_ACP_ARGS", f'["{spec.args[0]}"]')
    monkeypatch.setenv("HIVE_ACP_ENV", "{" + ",".join(f'"{k}":"{v}"' for k, v in spec.env) + "}")
    monkeypatch.chdir(agent.root)
    spawned: list[int] = []

    def prestart_then_signal(command: AgentCommand, *, cwd: Path) -> object:
        waiting = prestart(command, cwd=cwd)
        assert waiting is not None
        spawned.append(waiting.spawned.popen.pid)
        wait_for_start(agent)
        os.kill(os.getpid(), signum)  # hive run is between its prestart and Trio: recorded
        return waiting

    monkeypatch.setattr(hive.hive_run, "prestart", prestart_then_signal)
    args = build_parser("run").parse_args(["run", "hello"])
    try:
        code = hive.hive_run.run_turn(args)
    finally:
        gc.unfreeze()  # run_turn froze this process's objects, as hive run's own
    assert code == 128 + signum
    assert f"hive: {signum.name}: stopped while waiting for" in capfd.readouterr().err
    assert agent.pids() == spawned  # the one spawned before Trio, adopted or not, and no other
    trio.run(wait_exited, spawned[0])
    assert agent.signals() == ["SIGINT"]


def test_the_recorded_signals_are_handed_back(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with hive.hive_run.recording_signals() as received:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert received == [signal.SIGTERM, signal.SIGINT]
    assert {s: signal.getsignal(s) for s in before} == before


def test_an_agent_that_cannot_be_spawned_is_left_to_the_runtime_to_report(tmp_path: Path) -> None:
    """``start_agent`` tries again and says why (test_hive_run: "no such executable")."""
    missing = AgentCommand((str(tmp_path / "no-such-agent"),), dict(os.environ))
    assert prestart(missing, cwd=tmp_path) is None
    assert unclaimed() == []


@pytest.mark.parametrize("size", [0, 300_000, 3 << 20])
async def test_stdin_data_arrives_whole_and_then_stdin_closes(tmp_path: Path, size: int) -> None:
    # Issue 20, item 12: claude's prompt goes to its stdin. What the pipe takes is written at
    # the spawn (1 MiB), the rest by feed_stdin beside the reading of the output: no deadlock
    # with an agent that writes while it reads.
    data = bytes(range(256)) * (size // 256)
    script = "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(data)"
    with trio.fail_after(GUARD):
        agent = await start_agent(
            [sys.executable, "-c", script], cwd=tmp_path, env=dict(os.environ), stdin_data=data
        )
        if size <= 1 << 20:
            assert agent.stdin is None  # all of it fit in the widened pipe, which is closed
        # Past 1 MiB, how much the spawn wrote depends on how fast the agent read meanwhile (all
        # of it, on a loaded machine that ran the agent first): the rest, if any, is fed below.
        out = bytearray()

        async def read() -> None:
            while chunk := await agent.stdout.receive_some(1 << 20):
                out.extend(chunk)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.feed_stdin)
            nursery.start_soon(read)
        assert await agent.wait() == 0
        await agent.stdout.aclose()
        await agent.stderr.aclose()
    assert bytes(out) == data
    assert not agent.signalled
