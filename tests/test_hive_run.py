"""``hive run``: one turn from the command line, as a real process, against the fake claude."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.helpers.acp_fake import FakeAcp
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.processes import wait_exited

GUARD = 30


@pytest.fixture
def fake(short_tmp: Path) -> Iterator[FakeClaude]:
    claude = FakeClaude(short_tmp).install()
    try:
        yield claude
    finally:
        claude.cleanup()


def hive_env(fake: FakeClaude, **extra: str) -> dict[str, str]:
    return {**os.environ, **dict(fake.env()), "HIVE_CLAUDE_COMMAND": str(fake.executable), **extra}


async def hive_run(fake: FakeClaude, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(GUARD):
        return await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", *args],
            env=hive_env(fake, **env),
            cwd=fake.root,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_prints_the_stream_and_the_session_and_exits_0(fake: FakeClaude) -> None:
    fake.script([{"replay": "01_text_turn.jsonl"}])
    done = await hive_run(fake, "say hello")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "system"
    assert lines[-1]["type"] == "result"
    session = lines[0]["session_id"]
    assert f"session: {session}" in done.stderr.decode()


async def test_continues_a_session_with_the_model_and_effort_asked_for(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    done = await hive_run(fake, "--session", "abc-123", "--model", "opus", "--effort", "max", "go on")
    assert done.returncode == 0, done.stderr
    (start,) = fake.starts()
    assert "--resume=abc-123" in start["argv"]
    assert (start["options"]["model"], start["options"]["effort"], start["prompt"]) == (
        "opus",
        "max",
        "go on",
    )
    assert "session: abc-123" in done.stderr.decode()


async def test_an_error_result_exits_1(fake: FakeClaude) -> None:
    fake.script([{"replay": "04_error_max_turns.jsonl"}, {"exit": 1}])
    done = await hive_run(fake, "go")
    assert done.returncode == 1
    assert json.loads(done.stdout.splitlines()[-1])["subtype"] == "error_max_turns"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"HIVE_RUNTIME": "gpt"}, "HIVE_RUNTIME"),
        ({"HIVE_CLAUDE_COMMAND": "/nonexistent/claude"}, "no such executable"),
    ],
)
async def test_a_bad_setting_exits_2_saying_why(fake: FakeClaude, env: dict[str, str], says: str) -> None:
    done = await hive_run(fake, "go", **env)
    assert done.returncode == 2
    assert says in done.stderr.decode()
    assert done.stdout == b""


async def run_and_signal(
    fake: FakeClaude, signum: signal.Signals, *args: str
) -> tuple[int, list[dict[str, object]], str]:
    """Start ``hive run``, send it ``signum`` once the agent's first line is out; its exit status,
    stdout lines and stderr."""
    with trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "hive.cli", "run", *args, "go"],
            env=hive_env(fake),
            cwd=fake.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        out, err = bytearray(), bytearray()
        while b"\n" not in out:
            out += await process.stdout.receive_some(65536)
        process.send_signal(signum)

        async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
            while chunk := await stream.receive_some(65536):
                into += chunk

        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect, process.stdout, out)
            nursery.start_soon(collect, process.stderr, err)
        code = await process.wait()
    return code, [json.loads(line) for line in out.splitlines()], err.decode()


async def test_sigint_stops_the_turn_the_sigint_way_and_prints_the_agents_result(fake: FakeClaude) -> None:
    # The signal handling is set before the first line: the test signals as soon as it reads one.
    fake.script(
        [
            {"on_signal": {"SIGINT": "interrupt_tool"}},
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 100"}}},
            {"sleep": 60},
        ]
    )
    code, lines, err = await run_and_signal(fake, signal.SIGINT)
    assert code == 1
    result = lines[-1]
    assert result["type"] == "result" and result["terminal_reason"] == "aborted_tools"
    assert "hive" not in result
    assert fake.signals() == ["SIGINT"]
    assert "stopping the turn" in err


async def test_sigterm_with_an_agent_that_ignores_sigint_exits_without_waiting_for_it(
    fake: FakeClaude,
) -> None:
    fake.script([{"on_signal": {"SIGINT": "ignore"}}, {"init": {}}, {"linger": True}])
    code, lines, err = await run_and_signal(fake, signal.SIGTERM, "--stop-grace", "0.5")
    assert code == 1
    result = lines[-1]
    assert result["type"] == "result" and result["hive"]["synthesized"] is True
    # hive run took SIGTERM; the agent only ever got SIGINT: hive run's, and the kernel's when
    # hive run exits (its parent-death signal), which it may not have recorded yet.
    assert fake.signals()[0] == "SIGINT" and set(fake.signals()) == {"SIGINT"}
    (start,) = fake.starts()
    assert Path(f"/proc/{start['pid']}").exists()  # left running, not killed
    assert "ended without the agent's result" in err


# -- hive run on the ACP runtime ------------------------------------------------------------------


def acp_env(agent: FakeAcp, **extra: str) -> dict[str, str]:
    spec = agent.spec()
    return {
        **os.environ,
        "HIVE_RUNTIME": "acp",
        "HIVE_ACP_COMMAND": str(spec.command),
        "HIVE_ACP_ARGS": json.dumps(list(spec.args)),
        "HIVE_ACP_ENV": json.dumps(dict(spec.env)),
        **extra,
    }


async def hive_run_acp(agent: FakeAcp, *args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(GUARD):
        return await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", *args],
            env=acp_env(agent),
            cwd=agent.root,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_hive_run_drives_an_acp_agent_and_continues_its_session(short_tmp: Path) -> None:
    agent = FakeAcp(short_tmp)
    agent.script("default")
    try:
        first = await hive_run_acp(agent, "hello")
        assert first.returncode == 0, first.stderr
        lines = [json.loads(line) for line in first.stdout.splitlines()]
        assert [line["type"] for line in lines] == ["system", "assistant", "result"]
        session = lines[0]["session_id"]
        assert f"session: {session}" in first.stderr.decode()
        again = await hive_run_acp(agent, "--session", session, "again")
        assert again.returncode == 0, again.stderr
        assert [e["sessionId"] for e in agent.events("load_session")] == [session]
    finally:
        agent.cleanup()


async def test_hive_run_with_an_agent_refused_at_initialize_exits_non_zero_saying_why(
    short_tmp: Path,
) -> None:
    agent = FakeAcp(short_tmp)
    agent.script("default", capabilities={"mcpCapabilities": {}})
    try:
        done = await hive_run_acp(agent, "hello")
        assert done.returncode == 2
        assert "mcpCapabilities.http" in done.stderr.decode()
        assert done.stdout == b""
    finally:
        agent.cleanup()


# -- stopping hive run at any point, and the same failures on both backends ------------------------


async def start_hive_run_acp(agent: FakeAcp, *args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, "-m", "hive.cli", "run", *args],
        env=acp_env(agent),
        cwd=agent.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def finish(process: trio.Process) -> tuple[int, bytes, str]:
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()

    async def collect(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        while chunk := await stream.receive_some(65536):
            into += chunk

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect, process.stdout, out)
        nursery.start_soon(collect, process.stderr, err)
    return await process.wait(), bytes(out), err.decode()


@pytest.mark.parametrize(("hang", "signum"), [("initialize", signal.SIGINT), ("initialize", signal.SIGTERM)])
async def test_a_signal_while_the_agent_starts_sigints_it_and_says_what_hive_waited_for(
    short_tmp: Path, hang: str, signum: signal.Signals
) -> None:
    agent = FakeAcp(short_tmp)
    agent.script("default", hang=[hang])
    try:
        with trio.fail_after(GUARD):
            process = await start_hive_run_acp(agent, "hello")
            await agent.wait_for_event("hang")
            process.send_signal(signum)
            code, out, err = await finish(process)
            (pid,) = agent.pids()
            await wait_exited(pid)
        assert code == 128 + signum
        assert f"stopped while waiting for the ACP agent {sys.executable!r} to answer initialize" in err
        assert out == b""
        assert agent.signals() == ["SIGINT"]  # whatever hive run got, the agent got SIGINT
    finally:
        agent.cleanup()


async def test_a_signal_while_the_session_opens_sigints_the_agent_and_prints_why(short_tmp: Path) -> None:
    agent = FakeAcp(short_tmp)
    agent.script("default", hang=["session/new"])
    try:
        with trio.fail_after(GUARD):
            process = await start_hive_run_acp(agent, "hello")
            await agent.wait_for_event("hang")
            process.send_signal(signal.SIGINT)
            code, out, err = await finish(process)
            (pid,) = agent.pids()
            await wait_exited(pid)
        assert code == 1
        (result,) = [json.loads(line) for line in out.splitlines()]
        assert result["type"] == "result" and result["hive"]["killed"] is True
        assert "while waiting for the ACP agent to answer session/new" in err
        assert agent.signals() == ["SIGINT"]
    finally:
        agent.cleanup()


async def test_a_claude_lingering_after_its_result_gets_sigint_and_does_not_hold_hive_run(
    fake: FakeClaude,
) -> None:
    fake.script([{"default_turn": True}, {"linger": True}])
    done = await hive_run(fake, "go")  # the fake would linger 120 s; GUARD is 30
    assert done.returncode == 0, done.stderr
    (start,) = fake.starts()
    with trio.fail_after(GUARD):
        await wait_exited(start["pid"])
    assert fake.signals() == ["SIGINT"]


async def test_an_unknown_session_fails_the_same_way_on_both_backends(
    fake: FakeClaude, short_tmp: Path
) -> None:
    fake.script([{"default_turn": True}], sessions=True)
    on_claude = await hive_run(fake, "--session", "0b7c1f5e-0000-4000-8000-000000000000", "go on")
    agent = FakeAcp(short_tmp)
    agent.script("default")
    try:
        on_acp = await hive_run_acp(agent, "--session", "sess_unknown", "go on")
    finally:
        agent.cleanup()
    for done, session in ((on_claude, "0b7c1f5e-0000-4000-8000-000000000000"), (on_acp, "sess_unknown")):
        assert done.returncode == 2, done.stderr
        assert f"hive: no session {session!r} to continue" in done.stderr.decode()
        assert "Run without --session to start a new one." in done.stderr.decode()


async def test_the_permission_flag_reaches_claude(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    done = await hive_run(fake, "--permission", "accept_edits", "go")
    assert done.returncode == 0, done.stderr
    (start,) = fake.starts()
    assert start["options"]["permission_mode"] == "acceptEdits"
    bad = await hive_run(fake, "--permission", "yolo", "go")
    assert bad.returncode == 2 and b"invalid choice: 'yolo'" in bad.stderr
