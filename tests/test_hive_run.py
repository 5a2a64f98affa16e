"""``hive run``: one turn from the command line, as a real process, against the fake claude."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hive._hive_run_turn import session_line
from hive.agent import OptionsError, parse_options
from hive.cli import build_parser
from hive.errors import BadInput
from hive.hive_run import config_from, prompt_from
from tests.helpers.acp_fake import FakeAcp
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import claude_env
from tests.helpers.processes import wait_exited

GUARD = 30


def hive_env(fake: FakeClaude, **extra: str) -> dict[str, str]:
    return {**os.environ, **claude_env(fake), **extra}


async def hive_run(
    fake: FakeClaude, *args: str, stdin: bytes = b"", **env: str
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(GUARD):
        return await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", *args],
            env=hive_env(fake, **env),
            cwd=fake.root,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


# -- the command line, in process ------------------------------------------------------------------


def run_args(*argv: str) -> argparse.Namespace:
    return build_parser("run").parse_args(["run", *argv])


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--compact-at", "5"),
        ("--compact-at", "0"),
        ("--compact-at", "soon"),
        ("--stop-grace", "-3"),
        ("--stop-grace", "inf"),
        ("--idle-timeout", "-1"),
        ("--idle-timeout", "0"),
        ("--idle-timeout", "nan"),
    ],
)
def test_a_bad_setting_is_refused_as_hive_agent_refuses_it(tmp_path: Path, flag: str, value: str) -> None:
    with pytest.raises(BadInput) as on_run:
        config_from(run_args(flag, value, "go"))
    with pytest.raises(OptionsError) as on_agent:
        parse_options([flag, value], env={"HIVE_STATE_DIR": str(tmp_path)})
    assert str(on_run.value) == str(on_agent.value)
    assert str(on_run.value).startswith(f"{flag}: {value!r} is not ")
    assert on_run.value.exit_code == 2


def test_the_settings_reach_the_config_and_compact_at_takes_off() -> None:
    config = config_from(run_args("--compact-at", "off", "--stop-grace", "0", "--idle-timeout", "2.5", "go"))
    assert (config.compaction.watermark, config.stop_grace, config.idle_timeout) == (None, 0, 2.5)
    assert config_from(run_args("--compact-at", "0.6", "go")).compaction.watermark == 0.6
    default = config_from(run_args("go"))
    assert (default.compaction.watermark, default.stop_grace, default.idle_timeout) == (None, 10, None)


def test_the_prompt_is_its_words_joined_or_stdin_or_a_file(tmp_path: Path) -> None:
    assert prompt_from(run_args("look", "at", "the", "test")) == "look at the test"
    assert prompt_from(run_args("look at  the", "test")) == "look at  the test"
    text = "the first words " + "m" * 300_000 + " the last words\n"
    assert prompt_from(run_args("-"), io.BytesIO(text.encode())) == text
    (tmp_path / "prompt").write_text(text)
    assert prompt_from(run_args("--file", str(tmp_path / "prompt"))) == text


@pytest.mark.parametrize(
    ("argv", "stdin", "says"),
    [
        ([], b"", "no prompt: give it as words (quoted to keep its spacing), - to read it from stdin"),
        (["-"], b" \n", "the prompt is empty (or only blanks): give the agent something to do"),
        (["-"], b"caf\xe9", "the prompt from stdin is not UTF-8 text (its byte 3"),
        (["go", "--file", "F"], b"", "give the prompt one way"),
        (["--file", "missing"], b"", "cannot read --file missing: No such file or directory"),
        ([""], b"", "the prompt is empty"),
    ],
)
def test_no_prompt_or_a_bad_one_is_refused_saying_how_to_give_one(
    argv: list[str], stdin: bytes, says: str
) -> None:
    with pytest.raises(BadInput) as refused:
        prompt_from(run_args(*argv), io.BytesIO(stdin))
    assert str(refused.value).startswith(says)


def test_help_says_how_to_give_the_prompt_and_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_args("--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "[--file F]" in text and "[PROMPT ...]" in text
    assert "joined with one space" in text and "`-` alone reads it from stdin" in text
    assert "over 128 KiB cannot be an argument" in text and "up to 1 MiB" in text
    assert "exit status: 0 the turn's result is not an error" in text
    assert "2 the turn could not run" in text and "128+N stopped by signal N" in text
    assert "--stop-grace S" in text and "(0 or more; default 10)" in text


def test_the_session_line_says_there_is_none_rather_than_none() -> None:
    assert session_line("abc-123") == "session: abc-123"
    assert "None" not in session_line(None)
    assert session_line(None).startswith("hive: no session to continue")


# -- hive run as a process ----------------------------------------------------------------------------


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


async def test_a_bad_flag_exits_2_in_one_line_before_any_agent_is_spawned(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    done = await hive_run(fake, "--compact-at", "5", "go")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "hive: --compact-at: '5' is not a fraction of the context window in (0, 1] (e.g. 0.8), nor 'off'"
    ]
    assert fake.starts() == []


async def test_an_unquoted_prompt_and_a_prompt_on_stdin_past_128_kib_reach_the_agent_whole(
    fake: FakeClaude,
) -> None:
    fake.script([{"default_turn": True}], [{"default_turn": True}])
    words = await hive_run(fake, "look", "at", "the", "test")
    assert words.returncode == 0, words.stderr
    text = "the first words " + "m" * 300_000 + " the last words"
    piped = await hive_run(fake, "-", stdin=text.encode())
    assert piped.returncode == 0, piped.stderr
    assert [start["prompt"] for start in fake.starts()] == ["look at the test", text]


async def test_a_turn_without_a_session_says_so_rather_than_session_none(fake: FakeClaude) -> None:
    fake.script([{"exit": 1}])
    done = await hive_run(fake, "go")
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "session: None" not in err
    assert "hive: no session to continue: the agent ended the turn before it named one" in err


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
        assert process.stdout is not None
        first = b""
        while b"\n" not in first:
            first += await process.stdout.receive_some(65536)
        process.send_signal(signum)
        code, out, err = await finish(process, first)
    return code, [json.loads(line) for line in out.splitlines()], err


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
    agent.script("default", protocol_version=2)
    try:
        done = await hive_run_acp(agent, "hello")
        assert done.returncode == 2
        assert "speaks protocol version 2; hive speaks 1" in done.stderr.decode()
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


async def finish(process: trio.Process, read: bytes = b"") -> tuple[int, bytes, str]:
    """Its exit status, its stdout (after ``read``, what the test read of it already) and its stderr."""
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(read), bytearray()

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


ROOT_REFUSAL = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"


@pytest.mark.skipif(os.geteuid() != 0, reason="claude refuses to bypass permissions only as root")
async def test_permission_allow_as_root_without_is_sandbox_exits_2_saying_to_set_it(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    env = hive_env(fake)
    env.pop("IS_SANDBOX", None)
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", "--permission", "allow", "go"],
            env=env,
            cwd=fake.root,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("hive: claude refuses to bypass permissions as root")
    assert "set IS_SANDBOX=1 in its environment" in line


async def test_an_acp_agent_refused_as_root_says_to_set_is_sandbox(short_tmp: Path) -> None:
    agent = FakeAcp(short_tmp)
    agent.script([{"crash": 1, "stderr": ROOT_REFUSAL}])
    try:
        done = await hive_run_acp(agent, "--permission", "allow", "go")
    finally:
        agent.cleanup()
    assert done.returncode == 1
    assert "set IS_SANDBOX=1 in its environment" in done.stderr.decode()
