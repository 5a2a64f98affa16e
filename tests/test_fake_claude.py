"""The fake `claude` (fixtures/fake_claude.py) itself: command line, scripts, record, signals.

Plain synchronous tests with real processes: the fake is what hive's claude backend tests stand
on, so its own behaviour is pinned here. Every process is started in a session of its own and
SIGKILLed at teardown if it is still there (fine for the fake; hive itself never escalates).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from fixtures import fake_claude
from tests.helpers.inotify import wait_until_blocking

STREAM = ["-p", "--output-format", "stream-json", "--verbose"]
SAMPLES = Path(fake_claude.SAMPLES_DIR)


class Lines:
    """Reads a process's stdout by lines, with timeouts, straight from the pipe."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.fd = process.stdout.fileno()
        self.buffer = b""
        self.eof = False

    def _read(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no output from the fake in time")
        ready, _, _ = select.select([self.fd], [], [], remaining)
        if ready:
            chunk = os.read(self.fd, 1 << 16)
            self.eof = not chunk
            self.buffer += chunk

    def line(self, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.eof:
                raise EOFError(self.buffer)
            self._read(deadline)
        line, _, self.buffer = self.buffer.partition(b"\n")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def rest(self, timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not self.eof:
            self._read(deadline)
        lines, self.buffer = self.buffer.splitlines(), b""
        return [json.loads(line) for line in lines]

    def quiet_for(self, seconds: float) -> bool:
        """True if nothing at all (no data, no EOF) arrives for ``seconds``."""
        ready, _, _ = select.select([self.fd], [], [], seconds)
        return not ready


class Fake:
    """Runs the fake with a script and a record in a temporary directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.record = tmp / "record.jsonl"
        self.script: Path | None = None
        self.processes: list[subprocess.Popen[bytes]] = []

    def turns(self, *turns: Any, **options: Any) -> None:
        self.script = Path(fake_claude.write_script(self.tmp / "script.json", list(turns), **options))

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_", "HIVE_", "CLAUDE"))}
        env["FAKE_CLAUDE_RECORD"] = str(self.record)
        env["FAKE_CLAUDE_MAX_SECONDS"] = "60"
        if self.script is not None:
            env["FAKE_CLAUDE_SCRIPT"] = str(self.script)
        env.update(extra)
        return env

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*fake_claude.command(), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=self.env(**env),
            cwd=cwd or self.tmp,
            timeout=10,
            check=False,
        )

    def start(self, *args: str, stdin: int = subprocess.DEVNULL, **env: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [*fake_claude.command(), *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(**env),
            cwd=self.tmp,
            start_new_session=True,
            bufsize=0,
        )
        self.processes.append(process)
        return process

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in fake_claude.read_record(self.record) if kind is None or e["event"] == kind]

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0) -> None:
        """Until the record says what we expect (read again whenever its directory changes)."""
        try:
            wait_until_blocking(lambda: predicate(self.events()), self.record.parent, timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"record never matched: {self.events()}") from None

    def cleanup(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
            for stream in (process.stdout, process.stderr, process.stdin):
                if stream is not None:
                    stream.close()
        for spawned in self.events("spawned"):
            kill = os.killpg if spawned["new_session"] else os.kill
            with contextlib.suppress(ProcessLookupError):
                kill(spawned["pid"], signal.SIGKILL)


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Fake]:
    handle = Fake(tmp_path)
    try:
        yield handle
    finally:
        handle.cleanup()


def stdout_lines(completed: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in completed.stdout.splitlines()]


def signals_recorded(count: int, events: list[dict[str, Any]]) -> bool:
    return len([e for e in events if e["event"] == "signal"]) == count


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


# --- command line --------------------------------------------------------------------------


def test_stream_json_without_verbose_is_refused_like_the_real_cli(fake: Fake) -> None:
    done = fake.run("-p", "--output-format", "stream-json", "hello")
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr == b"Error: When using --print, --output-format=stream-json requires --verbose\n"
    start, end = fake.events()
    assert start["turn"] is None
    assert end == {**end, "event": "exit", "code": 1}


def test_default_turn_in_stream_json_and_in_text(fake: Fake) -> None:
    done = fake.run(*STREAM, "hello")
    assert done.returncode == 0, done.stderr
    init, text, result = stdout_lines(done)
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert text["message"]["content"] == [{"type": "text", "text": "fake claude reply to: hello"}]
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "fake claude reply to: hello",
    )
    uuid.UUID(init["session_id"])
    assert init["session_id"] == text["session_id"] == result["session_id"]

    plain = fake.run("-p", "hello")
    assert (plain.returncode, plain.stdout) == (0, b"fake claude reply to: hello\n")


def test_version(fake: Fake) -> None:
    done = fake.run("--version")
    assert (done.returncode, done.stdout) == (0, b"2.1.197 (Claude Code)\n")


def test_command_line_and_environment_are_recorded(fake: Fake) -> None:
    mcp = json.dumps({"mcpServers": {"hub": {"command": "hub-server"}}})
    args = [
        *STREAM,
        "--model",
        "opus",
        "--mcp-config",
        mcp,
        "--strict-mcp-config",
        "--allowedTools",
        "Bash",
        "Edit",
        "--disallowedTools=Write",
        "--append-system-prompt",
        "be brief",
        "--frobnicate",
        "--",
        "-a prompt that starts with a dash",
    ]
    done = fake.run(*args, HIVE_THING="1", CLAUDECODE="1", ANTHROPIC_BASE_URL="http://x", UNRELATED="no")
    assert done.returncode == 0, done.stderr
    (start,) = fake.events("start")
    assert start["argv"][1:] == start["args"] == args
    assert start["cwd"] == str(fake.tmp)
    assert start["prompt"] == "-a prompt that starts with a dash"
    assert start["options"]["allowed_tools"] == ["Bash", "Edit"]
    assert start["options"]["disallowed_tools"] == ["Write"]
    assert start["options"]["strict_mcp_config"] is True
    assert start["options"]["model"] == "opus"
    assert start["unknown_flags"] == ["--frobnicate"]
    assert start["stdin_is_devnull"] is True
    assert start["env"]["HIVE_THING"] == start["env"]["CLAUDECODE"] == "1"
    assert start["env"]["ANTHROPIC_BASE_URL"] == "http://x"
    assert "UNRELATED" not in start["env"]
    assert "HOME" in start["env"]
    init = stdout_lines(done)[0]
    assert init["mcp_servers"] == [{"name": "hub", "status": "connected"}]
    assert init["model"] == "opus"


def test_a_variadic_flag_swallows_the_prompt_like_commander_does(fake: Fake) -> None:
    done = fake.run(*STREAM, "--allowedTools", "Bash", "the prompt")
    assert done.returncode == 1
    assert b"Input must be provided" in done.stderr
    (start,) = fake.events("start")
    assert start["options"]["allowed_tools"] == ["Bash", "the prompt"]
    assert start["prompt"] is None


def test_an_open_stdin_pipe_costs_a_wait_and_a_warning(fake: Fake) -> None:
    process = fake.start(*STREAM, "hello", stdin=subprocess.PIPE, FAKE_CLAUDE_STDIN_WAIT="0.2")
    assert [line["type"] for line in Lines(process).rest()] == ["system", "assistant", "result"]
    assert process.wait(timeout=5) == 0
    assert process.stderr is not None
    assert b"no stdin data received" in process.stderr.read()
    (start,) = fake.events("start")
    assert (start["stdin"], start["stdin_is_devnull"]) == ("pipe", False)
    (stdin,) = fake.events("stdin")
    assert stdin["timed_out"] is True


# --- session ids and turns -----------------------------------------------------------------


def test_session_id_comes_from_resume_then_session_id(fake: Fake) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    cases = [
        ([f"--resume={first}"], first),
        (["--resume", first], first),
        (["--session-id", second], second),
        (["--session-id", second, f"--resume={first}"], first),
    ]
    for flags, expected in cases:
        done = fake.run(*STREAM, *flags, "hi")
        assert done.returncode == 0, done.stderr
        assert {line["session_id"] for line in stdout_lines(done)} == {expected}, flags
    assert [e["session_id"] for e in fake.events("start")] == [expected for _, expected in cases]


def test_session_id_is_filled_in_unless_the_script_sets_one(fake: Fake) -> None:
    fake.turns(
        [
            {"emit": {"type": "system", "subtype": "status", "status": "requesting"}},
            {"emit": {"type": "x", "session_id": "{session_id}", "note": "in {session_id}"}},
            {"emit": {"type": "x", "session_id": "someone-else"}},
        ]
    )
    sid = str(uuid.uuid4())
    missing, placeholder, explicit = stdout_lines(fake.run(*STREAM, f"--resume={sid}", "hi"))
    assert missing["session_id"] == placeholder["session_id"] == sid
    assert placeholder["note"] == f"in {sid}"
    assert explicit["session_id"] == "someone-else"


def test_each_invocation_plays_the_next_turn_and_the_last_repeats(fake: Fake) -> None:
    fake.turns([{"init": {}}, {"text": "one"}, {"result": {}}], [{"text": "two"}, {"exit": 3}])
    texts, codes = [], []
    for _ in range(3):
        done = fake.run(*STREAM, "hi")
        codes.append(done.returncode)
        texts.append(
            [
                line["message"]["content"][0]["text"]
                for line in stdout_lines(done)
                if line["type"] == "assistant"
            ]
        )
    assert texts == [["one"], ["two"], ["two"]]
    assert codes == [0, 3, 3]
    assert [e["turn"] for e in fake.events("start")] == [1, 2, 3]
    assert [(e["code"], e["reason"]) for e in fake.events("exit")] == [
        (0, "end of turn"),
        (3, "exit step"),
        (3, "exit step"),
    ]


def test_sessions_mode_checks_resume_like_the_real_store(fake: Fake, tmp_path: Path) -> None:
    fake.turns("default", sessions=True)
    sid = str(uuid.uuid4())
    assert fake.run(*STREAM, "--session-id", sid, "hi").returncode == 0
    assert fake.run(*STREAM, f"--resume={sid}", "hi").returncode == 0

    reused = fake.run(*STREAM, "--session-id", sid, "hi")
    assert reused.returncode == 1
    assert reused.stderr == f"Error: Session ID {sid} is already in use.\n".encode()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lost = fake.run(*STREAM, f"--resume={sid}", "hi", cwd=elsewhere)
    assert lost.returncode == 1
    assert f"No conversation found with session ID: {sid}".encode() in lost.stderr
    (result,) = stdout_lines(lost)
    assert (result["type"], result["subtype"], result["num_turns"]) == ("result", "error_during_execution", 0)
    assert [e["turn"] for e in fake.events("start")] == [1, 2, None, None]


# --- what a turn can write -----------------------------------------------------------------


def test_replay_rewrites_session_ids(fake: Fake) -> None:
    fake.turns(
        [{"replay": "02_tool_turn_with_partial_messages.jsonl"}],
        [{"replay": "11_stdin_control_interrupt_during_tool.transcript.jsonl", "stop": 3}],
    )
    sid = str(uuid.uuid4())
    sample = [
        json.loads(line)
        for line in (SAMPLES / "02_tool_turn_with_partial_messages.jsonl").read_text().splitlines()
    ]
    played = stdout_lines(fake.run(*STREAM, f"--resume={sid}", "hi"))
    assert len(played) == len(sample) > 20
    assert [line["type"] for line in played] == [line["type"] for line in sample]
    assert {line["session_id"] for line in played} == {sid}
    assert played[5] == {**sample[5], "session_id": sid}

    transcript = stdout_lines(fake.run(*STREAM, f"--resume={sid}", "hi"))
    assert len(transcript) == 3
    assert transcript[0]["subtype"] == "init"  # the transcript's "in" lines are not played
    assert transcript[0]["session_id"] == sid


def test_garbage_big_lines_and_a_truncated_tail(fake: Fake) -> None:
    fake.turns(
        [
            {"init": {}},
            {"emit_raw": "[SandboxDebug] not json\n"},
            {"emit_raw": '{"type": "broken\n'},
            {"emit_big": 2_000_000},
            {"emit": {"type": "something_new", "payload": [1, 2]}},
            {"emit_raw": '{"type":"assistant","mess'},
        ]
    )
    done = fake.run(*STREAM, "hi")
    assert done.returncode == 0
    lines = done.stdout.split(b"\n")
    assert lines[1:3] == [b"[SandboxDebug] not json", b'{"type": "broken']
    assert len(lines[3]) + 1 == 2_000_000
    big = json.loads(lines[3])
    assert big["type"] == "assistant"
    assert big["message"]["content"][0]["text"] == "x" * len(big["message"]["content"][0]["text"])
    assert json.loads(lines[4])["type"] == "something_new"
    assert lines[5] == b'{"type":"assistant","mess'  # no newline after it


def test_emit_many(fake: Fake) -> None:
    fake.turns(
        [{"emit_many": {"count": 50_000, "message": {"type": "stream_event", "event": {"type": "ping"}}}}]
    )
    done = fake.run(*STREAM, "hi")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert len(lines) == 50_000
    assert len(set(lines)) == 1
    assert json.loads(lines[0])["session_id"] == fake.events("start")[0]["session_id"]


def test_a_result_spelled_as_other_json_writers_write_it(fake: Fake) -> None:
    fake.turns(
        *([{"text": "done"}, {"result": {}, "spelling": spelling}] for spelling in fake_claude.SPELLINGS)
    )
    spaced, type_last, escaped = (fake.run(*STREAM, "hi").stdout.splitlines()[-1] for _ in range(3))
    for line in (spaced, type_last, escaped):
        result = json.loads(line)
        assert (result["type"], result["subtype"], result["result"]) == ("result", "success", "done")
        assert b'"type":"result"' not in line
    assert spaced.startswith(b'{"type": "result", ')
    assert type_last.endswith(b', "type": "result"}')
    assert escaped.startswith(b'{"t\\u0079pe":"res\\u0075\\u006ct",')


def test_stderr_flood_does_not_block_a_reader_that_drains_it(fake: Fake) -> None:
    fake.turns([{"stderr_bytes": 1_000_000}, {"default_turn": True}])
    done = fake.run(*STREAM, "hi")
    assert done.returncode == 0
    assert len(done.stderr) == 1_000_000
    assert [line["type"] for line in stdout_lines(done)] == ["system", "assistant", "result"]


def test_a_reader_that_goes_away_ends_the_fake_quietly(fake: Fake) -> None:
    fake.turns([{"emit_many": {"count": 1_000_000, "message": {"type": "stream_event", "event": {}}}}])
    process = fake.start(*STREAM, "hi")
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.read(1000)
    process.stdout.close()
    assert process.wait(timeout=5) == 141
    assert process.stderr.read() == b""
    assert fake.events("exit")[-1]["reason"] == "broken pipe on stdout"


def test_script_errors_are_loud(fake: Fake) -> None:
    fake.turns([{"emitt": {}}])
    done = fake.run(*STREAM, "hi")
    assert done.returncode == 2
    assert b"script error" in done.stderr


# --- signals, lingering, grandchildren -----------------------------------------------------


def test_sigint_to_a_fake_waiting_for_it_is_recorded_and_the_turn_goes_on(fake: Fake) -> None:
    fake.turns(
        [
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 1000"}}},
            {"wait_for_signal": "SIGINT"},
            {"interrupted": "tool"},
            {"exit": 1},
        ]
    )
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    assert lines.line()["subtype"] == "init"
    tool_use = lines.line()["message"]["content"][0]
    os.killpg(process.pid, signal.SIGINT)
    rejection, marker, result = lines.rest()
    assert rejection["message"]["content"][0]["tool_use_id"] == tool_use["id"]
    assert marker["message"]["content"][0]["text"] == "[Request interrupted by user for tool use]"
    assert (result["subtype"], result["terminal_reason"], result["is_error"]) == (
        "error_during_execution",
        "aborted_tools",
        True,
    )
    assert "result" not in result
    assert process.wait(timeout=5) == 1
    assert [e["signal"] for e in fake.events("signal")] == ["SIGINT"]
    (start,) = fake.events("start")
    assert start["pgid"] == start["sid"] == process.pid


def test_a_signal_that_comes_early_is_kept_for_the_wait(fake: Fake) -> None:
    fake.turns([{"init": {}}, {"sleep": 0.3}, {"wait_for_signal": "SIGINT"}, {"text": "after"}, {"exit": 3}])
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    lines.line()
    os.kill(process.pid, signal.SIGINT)  # during the sleep, before the wait step
    (after,) = lines.rest()
    assert after["message"]["content"][0]["text"] == "after"
    assert process.wait(timeout=5) == 3


def test_by_default_a_signal_ends_the_fake_with_128_plus_its_number(fake: Fake) -> None:
    fake.turns([{"init": {}}, {"sleep": 30}])
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        process = fake.start(*STREAM, "hi")
        Lines(process).line()
        os.killpg(process.pid, sig)
        assert process.wait(timeout=5) == code
        assert fake.events("signal")[-1]["signal"] == sig.name
        assert fake.events("exit")[-1] == {
            **fake.events("exit")[-1],
            "code": code,
            "reason": f"signal {sig.name}",
        }


def test_on_signal_preset_plays_an_interrupted_stream(fake: Fake) -> None:
    fake.turns([{"on_signal": {"SIGINT": "interrupt_stream"}}, {"init": {}}, {"text": "Hel"}, {"sleep": 30}])
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    lines.line()
    lines.line()
    os.killpg(process.pid, signal.SIGINT)
    marker, result = lines.rest()
    assert marker["message"]["content"][0]["text"] == "[Request interrupted by user]"
    assert (result["terminal_reason"], result["stop_reason"]) == ("aborted_streaming", None)
    assert process.wait(timeout=5) == 0


def test_a_fake_that_ignores_sigint_keeps_running(fake: Fake) -> None:
    fake.turns([{"init": {}}, {"result": {}}, {"linger": True}], on_signal={"SIGINT": "ignore"})
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    lines.line()
    assert lines.line()["type"] == "result"
    fake.wait_for(lambda events: any(e["event"] == "linger" for e in events))
    for count in (1, 2):  # one at a time: two signals of a kind sent at once can merge into one
        os.killpg(process.pid, signal.SIGINT)
        fake.wait_for(partial(signals_recorded, count))
    assert lines.quiet_for(0.2)  # neither output nor EOF
    assert process.poll() is None
    assert not fake.events("exit")  # the teardown's SIGKILL ends it


def test_linger_keeps_stdout_open_until_a_signal(fake: Fake) -> None:
    fake.turns([{"default_turn": True}, {"linger": True}])
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    assert [lines.line()["type"] for _ in range(3)] == ["system", "assistant", "result"]
    assert lines.quiet_for(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    assert lines.rest() == []
    assert process.wait(timeout=5) == 143
    assert [e["event"] for e in fake.events()][1:] == ["linger", "signal", "exit"]


def test_spawned_grandchildren_outlive_the_fake(fake: Fake) -> None:
    fake.turns(
        [
            {"spawn": "exec sleep 1000", "new_session": True},
            {"spawn": "exec sleep 1001"},
            {"default_turn": True},
        ]
    )
    done = fake.run(*STREAM, "hi")
    assert done.returncode == 0
    (start,) = fake.events("start")
    own, shared = fake.events("spawned")
    assert own["pgid"] == own["pid"] and own["new_session"] is True
    assert shared["pgid"] == start["pgid"] and shared["new_session"] is False
    assert alive(own["pid"]) and alive(shared["pid"])


def test_kill_spawned_stops_the_tool_tree_on_sigint(fake: Fake) -> None:
    sigint_steps = [{"kill_spawned": "SIGTERM"}, {"interrupted": "tool"}, {"exit": 1}]
    fake.turns(
        [
            {"on_signal": {"SIGINT": sigint_steps}},
            {"init": {}},
            {"spawn": "exec sleep 1002", "new_session": True},
            {"tool_use": {}},
            {"sleep": 30},
        ]
    )
    process = fake.start(*STREAM, "hi")
    lines = Lines(process)
    lines.line()
    lines.line()
    (spawned,) = fake.events("spawned")
    os.killpg(process.pid, signal.SIGINT)
    assert [line["type"] for line in lines.rest()] == ["user", "user", "result"]
    assert process.wait(timeout=5) == 1
    assert not alive(spawned["pid"])
    (killed,) = fake.events("killed_spawned")
    assert killed["pids"] == [spawned["pid"]]
