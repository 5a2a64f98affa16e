"""Bad input to the daemon: tool errors that say what was wrong, and a daemon that goes on serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from hive._unix import uid_allowed
from hive.bash import TaskSettings
from hive.bash.daemon import DaemonConfig, config_from_args, serve_daemon
from hive.daemon import read_message, refusal_of
from tests.helpers.daemon import DaemonHandle
from tests.helpers.jsonrpc import (
    INITIALIZE,
    answers_initialize,
    initialize,
    notification,
    open_relay,
    raw_exchange,
    request,
    result_of,
)
from tests.helpers.results import call, structured, text_of
from tests.helpers.strategies import rpc_json
from tests.helpers.tools import serving_tools

BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("run", {}, "cmd is required"),
    ("run", {"cmd": ""}, "cmd is empty"),
    ("run", {"cmd": "   "}, "cmd is empty"),
    ("run", {"cmd": 5}, "must be a string"),
    ("run", {"cmd": ["ls"]}, "must be a string"),
    ("run", {"cmd": "true", "name": "has space"}, "bad name"),
    ("run", {"cmd": "true", "name": "x" * 65}, "bad name"),
    ("run", {"cmd": "true", "name": ""}, "bad name"),
    ("run", {"cmd": "true", "name": 12}, "name must be a string"),
    ("run", {"cmd": "true", "timeout_secs": -1}, "must not be negative"),
    ("run", {"cmd": "true", "timeout_secs": "soon"}, "must be a number"),
    ("run", {"cmd": "true", "timeout_secs": True}, "must be a number"),
    ("run", {"cmd": "true", "timeout_secs": 0}, "more than 0"),
    ("run", {"cmd": "true", "timeout_secs": "inf"}, "finite"),
    ("run", {"cmd": "true", "wait_seconds": -0.5}, "must not be negative"),
    ("run", {"cmd": "true", "wait_seconds": "a while"}, "must be a number"),
    ("run", {"cmd": "true", "wait_seconds": {"s": 1}}, "must be a number"),
    ("run", {"cmd": "true", "timeout": 5}, "1 unknown argument: timeout"),
    ("status", {}, "id is required"),
    ("status", {"id": 7}, "id is required"),
    ("status", {"id": "nope"}, "no task has id 'nope'"),
    ("status", {"id": "nope", "wait_seconds": -1}, "must not be negative"),
    ("stop", {"id": "nope"}, "no task has id 'nope'"),
    ("stop", {}, "id is required"),
    ("list", {"all": True}, "1 unknown argument: all; this tool takes limit"),
    ("list", {"limit": -1}, "limit must be a whole number"),
    ("list", {"limit": "ten"}, "limit must be a whole number"),
    ("rm", {"id": "x"}, "unknown tool 'rm'"),
]


async def test_each_bad_call_is_a_tool_error_saying_what_was_wrong(short_tmp: Path) -> None:
    async with serving_tools(short_tmp) as tools:
        for tool, arguments, message in BAD_CALLS:
            result = await tools.call(tool, arguments)
            assert result.is_error, (tool, arguments, result.text)
            assert message in result.text, (tool, arguments, result.text)
        # Still serving.
        ok = await tools.call("run", {"cmd": "echo fine", "wait_seconds": 30})
        assert ok.structured["stdout"]["tail"] == "fine\n"


async def test_a_bad_call_through_the_relay_is_a_tool_error_and_the_session_goes_on(
    served: DaemonHandle,
) -> None:
    """End to end, one bad argument and one unknown tool (the rest are checked in-process above)."""
    async with served.session() as session:
        for tool, arguments, message in (BAD_CALLS[3], BAD_CALLS[-1]):
            result = await session.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments, text_of(result))
            assert message in text_of(result), (tool, arguments, text_of(result))
        # Still serving, on the same session.
        ok = await call(session, "run", cmd="echo fine", wait_seconds=30)
        assert structured(ok)["stdout"]["tail"] == "fine\n"


NOT_OBJECTS: list[tuple[object, str]] = [
    ("echo hi", "a string"),
    (["echo hi"], "an array"),
    (5, "a number"),
    (True, "a boolean"),
]
"""``arguments`` that is no object, and how the answer names what it is."""


async def test_arguments_that_are_not_an_object_are_a_tool_error_saying_so(
    served: DaemonHandle, short_tmp: Path
) -> None:
    async with open_relay(served.socket, short_tmp / "relay.err") as relay:
        with trio.fail_after(60):
            await relay.send(initialize(1), notification("notifications/initialized"))
            result_of(await relay.receive(), 1)
            for request_id, (arguments, kind) in enumerate(NOT_OBJECTS, 2):
                await relay.send(request(request_id, "tools/call", {"name": "run", "arguments": arguments}))
                answer = result_of(await relay.receive(), request_id)
                text = (
                    f"arguments must be an object naming each argument, not {kind}; this tool takes "
                    "cmd, timeout_secs, wait_seconds, name, notify_on, notify_max, full"
                )
                assert answer["isError"], answer
                assert answer["content"] == [{"type": "text", "text": text}]
                assert answer["structuredContent"] == {"error": "BadArgument", "message": text}
            # A tool that is not there is said to be so, whatever its arguments.
            await relay.send(request(9, "tools/call", {"name": "rm", "arguments": "x"}))
            unknown = result_of(await relay.receive(), 9)
            assert unknown["isError"] and "unknown tool 'rm'" in unknown["content"][0]["text"], unknown


async def test_numbers_may_come_as_strings_and_waits_are_capped(short_tmp: Path) -> None:
    async with serving_tools(short_tmp) as tools:
        result = await tools.call(
            "run", {"cmd": "echo x", "wait_seconds": "5", "timeout_secs": "60", "full": True}
        )
        assert not result.is_error, result.text
        assert result.structured["timeout_secs"] == 60
        gate = short_tmp / "gate"
        os.mkfifo(gate)  # the task ends when the test says so
        started = (await tools.call("run", {"cmd": f"read line < {gate}", "wait_seconds": 0})).structured
        assert started["state"] == "running"
        # Capped at 30 s rather than refused: the answer comes when the task ends.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, gate.write_text, "go\n")
            capped = await tools.call("status", {"id": started["id"], "wait_seconds": 1e9})
        assert not capped.is_error, capped.text
        assert capped.structured["state"] == "done"


async def test_garbage_gets_a_parse_error_and_ends_only_its_connection(served: DaemonHandle) -> None:
    async with served.session() as session:
        path = str(served.socket)
        reply = await trio.to_thread.run_sync(raw_exchange, path, b"\x00\xffnot json at all\n", False)
        error = json.loads(reply)
        assert error["error"]["code"] == -32700
        assert "not a JSON-RPC message" in error["error"]["message"]
        reply = await trio.to_thread.run_sync(raw_exchange, path, b'{"jsonrpc": "2.0", "id": 1}\n', False)
        assert json.loads(reply)["error"]["code"] == -32700
        # Half a message, then the client shuts its side: the connection just ends.
        assert await trio.to_thread.run_sync(raw_exchange, path, b'{"jsonrpc": "2.0", "met') == b""
        # The session opened before all this is untouched.
        assert (
            structured(await call(session, "run", cmd="echo still", wait_seconds=30))["stdout"]["tail"]
            == "still\n"
        )
        assert await trio.to_thread.run_sync(answers_initialize, path)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


INITIALIZED = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
LIST_CALL = _line(
    {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "list", "arguments": {}}}
)


@pytest.mark.parametrize(
    ("bad", "code", "answer_id", "says"),
    [
        (  # an object id: the SDK's model reads a notification, which is never answered
            b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"run","arguments":{"cmd":"true"}}}',
            -32600,
            None,
            "id must be a string or an integer",
        ),
        (  # a lone surrogate: valid JSON, not text
            b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"cmd":"echo \\ud800"}}}',
            -32602,
            3,
            "lone surrogate",
        ),
    ],
)
async def test_a_request_the_sdk_misreads_is_answered_saying_why_and_the_session_goes_on(
    served: DaemonHandle, bad: bytes, code: int, answer_id: object, says: str
) -> None:
    path = str(served.socket)
    # The daemon is this module's: the other tests' tasks are there before this one's requests.
    before = await trio.to_thread.run_sync(raw_exchange, path, INITIALIZE + INITIALIZED + LIST_CALL)
    tasks_before = json.loads(before.splitlines()[-1])["result"]["structuredContent"]["total"]
    payload = INITIALIZE + INITIALIZED + bad + b"\n" + LIST_CALL
    reply = await trio.to_thread.run_sync(raw_exchange, path, payload)
    answers = [json.loads(line) for line in reply.splitlines()]
    (error,) = [a for a in answers if "error" in a]
    assert error["id"] == answer_id
    assert error["error"]["code"] == code
    assert says in error["error"]["message"]
    assert "nothing was done" in error["error"]["message"].lower()
    results = {a["id"]: a["result"] for a in answers if "result" in a}
    assert sorted(results) == [1, 9]
    assert results[9]["structuredContent"]["total"] == tasks_before  # no task was started


async def test_an_oversized_message_ends_its_connection(served: DaemonHandle) -> None:
    path = str(served.socket)
    reply = await trio.to_thread.run_sync(raw_exchange, path, b"x" * (17 * 1024 * 1024), False)
    assert b"longer than" in reply
    assert await trio.to_thread.run_sync(answers_initialize, path)


def test_only_the_daemons_own_uid_and_root_are_allowed() -> None:
    assert uid_allowed(1000, 1000)
    assert uid_allowed(0, 1000)
    assert not uid_allowed(1001, 1000)
    assert uid_allowed(0, 0)
    assert not uid_allowed(65534, 0)


def exchange_as_uid(path: str, uid: int) -> bytes:
    """Connect as ``uid`` (from a forked child, which needs no executable that uid may run)."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() with threads; the child only touches a socket and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            os.setgid(uid)
            os.setuid(uid)
            os.write(write_end, raw_exchange(path, INITIALIZE))
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as replies:
        reply = replies.read()
    os.waitpid(pid, 0)
    return reply


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another uid needs root")
async def test_a_peer_with_another_uid_is_refused_even_if_the_socket_mode_lets_it_in(
    served: DaemonHandle,
) -> None:
    modes = os.stat(served.root).st_mode, os.stat(served.socket).st_mode
    os.chmod(served.root, 0o755)
    os.chmod(served.socket, 0o666)
    try:
        reply = await trio.to_thread.run_sync(exchange_as_uid, str(served.socket), 65534)
    finally:
        os.chmod(served.root, modes[0])
        os.chmod(served.socket, modes[1])
    reason = refusal_of(json.loads(reply))  # told why, not closed on in silence
    assert reason is not None and "uid 65534" in reason
    assert "refused a connection from uid 65534" in served.stderr_text()
    assert await trio.to_thread.run_sync(answers_initialize, str(served.socket))


async def test_a_second_daemon_on_the_same_state_dir_is_refused(served: DaemonHandle) -> None:
    result = await trio.run_process(
        [sys.executable, "-m", "hive.bash.daemon", *served.args(agent=False)],
        capture_stderr=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2  # another owner of the state: 2, as for every program
    assert b"another hive-bash-daemon is using" in result.stderr
    assert await trio.to_thread.run_sync(answers_initialize, str(served.socket))


BAD_FLAGS = [
    (["--kill-grace", "soon"], {}, "--kill-grace"),
    (["--max-output-bytes", "lots"], {}, "--max-output-bytes"),
    ([], {"HIVE_BASH_KILL_GRACE": "-3"}, "HIVE_BASH_KILL_GRACE"),
    ([], {"HIVE_BASH_MAX_OUTPUT_BYTES": "0"}, "HIVE_BASH_MAX_OUTPUT_BYTES"),
    (["--workdir", "/nonexistent/missing"], {}, "is not a directory"),
    ([], {"HIVE_BASH_NO_CGROUPS": "maybe"}, "HIVE_BASH_NO_CGROUPS: 'maybe' is not a yes or no; use 1 or 0"),
    ([], {"HIVE_BASH_MAX_RUNNING": "0"}, "HIVE_BASH_MAX_RUNNING: '0' must be 1 or more"),
]


def test_each_flag_not_given_is_read_from_its_variable(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = {
        "HIVE_BASH_SOCKET": str(short_tmp / "b.sock"),
        "HIVE_AGENT_SOCKET": str(short_tmp / "a.sock"),
        "HIVE_BASH_WORKDIR": str(short_tmp),
        "HIVE_BASH_NO_CGROUPS": "yes",
        "HIVE_BASH_MAX_RUNNING": "3",
        "HIVE_BASH_KILL_GRACE": "2.5",
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    config, _ = config_from_args(["--state-dir", str(short_tmp / "state"), "--max-running", "4"])
    assert (config.socket, config.agent_socket) == (short_tmp / "b.sock", short_tmp / "a.sock")
    assert (config.tasks.workdir, config.cgroups) == (short_tmp, False)
    assert (config.tasks.max_running, config.tasks.kill_grace) == (4, 2.5)  # the flag wins


@pytest.mark.parametrize(("args", "env", "message"), BAD_FLAGS)
def test_bad_flags_and_environment_are_refused_with_the_name_of_the_culprit(
    args: list[str],
    env: dict[str, str],
    message: str,
    short_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        config_from_args(["--state-dir", str(short_tmp / "state"), *args])
    assert exited.value.code != 0, (args, env)
    assert message in capsys.readouterr().err, (args, env)


async def test_a_socket_path_too_long_is_refused_with_the_name_of_the_flag(short_tmp: Path) -> None:
    config = DaemonConfig(
        state_dir=short_tmp / "state",
        socket=Path("/tmp/" + "s" * 120),
        tasks=TaskSettings(workdir=short_tmp),
        cgroups=False,
    )
    with pytest.raises((ValueError, ExceptionGroup)) as refused:
        await serve_daemon(config)
    assert any("choose a shorter --socket" in str(leaf) for leaf in leaves(refused.value)), refused.value


def test_a_bad_flag_is_refused_before_trio_or_the_sdk_is_imported(short_tmp: Path) -> None:
    """End to end: the program refuses the flag, naming it, and has imported neither Trio nor the
    MCP SDK by then (``-X importtime`` lists every module imported)."""
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "hive.bash.daemon",
            "--state-dir",
            str(short_tmp),
            "--kill-grace",
            "soon",
        ],
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert b"--kill-grace" in result.stderr
    imported = {
        line.rsplit(b"|", 1)[1].strip().decode().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith(b"import time:")
    }
    assert "hive" in imported  # the listing is there
    assert not imported & {"trio", "mcp", "mcp_types"}, sorted(imported)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc``, groups unwrapped."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


@given(st.binary(max_size=200) | rpc_json.map(lambda v: json.dumps(v).encode()))
def test_a_line_read_as_a_message_never_raises_and_a_misread_one_is_answered_with_a_usable_id(
    line: bytes,
) -> None:
    message = read_message(line)
    answer = getattr(message, "answer", None)
    if answer is not None:
        error = json.loads(answer)
        assert error["error"]["code"] in (-32600, -32602)
        assert error["id"] is None or isinstance(error["id"], str | int)
