"""Bad input to the daemon: tool errors that say what was wrong, and a daemon that goes on serving."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from hive.bash._framing import misread
from hive.bash._server import uid_allowed
from hive.bash.relay import refusal_of
from tests.conftest import DaemonHandle, call, structured, text_of

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
    ("run", {"cmd": "true", "timeout": 5}, "unknown argument(s) timeout"),
    ("status", {}, "id is required"),
    ("status", {"id": 7}, "id is required"),
    ("status", {"id": "nope"}, "no task has id 'nope'"),
    ("status", {"id": "nope", "wait_seconds": -1}, "must not be negative"),
    ("stop", {"id": "nope"}, "no task has id 'nope'"),
    ("stop", {}, "id is required"),
    ("list", {"all": True}, "unknown argument(s) all; this tool takes limit"),
    ("list", {"limit": -1}, "limit must be a whole number"),
    ("list", {"limit": "ten"}, "limit must be a whole number"),
    ("rm", {"id": "x"}, "unknown tool 'rm'"),
]


async def test_each_bad_call_is_a_tool_error_saying_what_was_wrong(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False), daemon.session() as session:
        for tool, arguments, message in BAD_CALLS:
            result = await session.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments, text_of(result))
            assert message in text_of(result), (tool, arguments, text_of(result))
        # Still serving, on the same session.
        ok = await call(session, "run", cmd="echo fine", wait_seconds=30)
        assert structured(ok)["stdout"]["tail"] == "fine\n"


async def test_numbers_may_come_as_strings_and_waits_are_capped(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False), daemon.session() as session:
        result = await call(session, "run", cmd="echo x", wait_seconds="5", timeout_secs="60")
        assert not result.is_error, text_of(result)
        assert structured(result)["timeout_secs"] == 60
        gate = daemon.root / "gate"
        os.mkfifo(gate)  # the task ends when the test says so
        started = structured(await call(session, "run", cmd=f"read line < {gate}", wait_seconds=0))
        assert started["state"] == "running"
        # Capped at 30 s rather than refused: the answer comes when the task ends.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, gate.write_text, "go\n")
            capped = await call(session, "status", id=started["id"], wait_seconds=1e9)
        assert not capped.is_error, text_of(capped)
        assert structured(capped)["state"] == "done"


def raw_exchange(path: str, payload: bytes, half_close: bool = True) -> bytes:
    """Send ``payload`` on a fresh connection and read until the daemon closes it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(path)
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon hung up before taking it all; what it answered is still to be read
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)


def answers_initialize(path: str) -> bool:
    reply = raw_exchange(path, INITIALIZE)
    return json.loads(reply.splitlines()[0])["result"]["serverInfo"]["name"] == "bash"


async def test_garbage_gets_a_parse_error_and_ends_only_its_connection(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False), daemon.session() as session:
        path = str(daemon.socket)
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
    daemon: DaemonHandle, bad: bytes, code: int, answer_id: object, says: str
) -> None:
    async with daemon.running(agent=False):
        payload = INITIALIZE + INITIALIZED + bad + b"\n" + LIST_CALL
        reply = await trio.to_thread.run_sync(raw_exchange, str(daemon.socket), payload)
    answers = [json.loads(line) for line in reply.splitlines()]
    (error,) = [a for a in answers if "error" in a]
    assert error["id"] == answer_id
    assert error["error"]["code"] == code
    assert says in error["error"]["message"]
    assert "nothing was done" in error["error"]["message"].lower()
    results = {a["id"]: a["result"] for a in answers if "result" in a}
    assert sorted(results) == [1, 9]
    assert results[9]["structuredContent"]["total"] == 0  # no task was started


async def test_an_oversized_message_ends_its_connection(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False):
        path = str(daemon.socket)
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
    daemon: DaemonHandle,
) -> None:
    async with daemon.running(agent=False):
        os.chmod(daemon.root, 0o755)
        os.chmod(daemon.socket, 0o666)
        reply = await trio.to_thread.run_sync(exchange_as_uid, str(daemon.socket), 65534)
        reason = refusal_of(json.loads(reply))  # told why, not closed on in silence
        assert reason is not None and "uid 65534" in reason
        assert "refused a connection from uid 65534" in daemon.stderr_text()
        assert await trio.to_thread.run_sync(answers_initialize, str(daemon.socket))


async def test_a_second_daemon_on_the_same_state_dir_is_refused(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False):
        result = await trio.run_process(
            [sys.executable, "-m", "hive.bash.daemon", *daemon.args(agent=False)],
            capture_stderr=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 2  # another owner of the state: 2, as for every program
        assert b"another hive-bash-daemon is using" in result.stderr
        assert await trio.to_thread.run_sync(answers_initialize, str(daemon.socket))


async def test_bad_flags_and_environment_are_refused_with_the_name_of_the_culprit(
    daemon: DaemonHandle,
) -> None:
    cases = [
        (["--kill-grace", "soon"], {}, b"--kill-grace"),
        (["--max-output-bytes", "lots"], {}, b"--max-output-bytes"),
        ([], {"HIVE_BASH_KILL_GRACE": "-3"}, b"HIVE_BASH_KILL_GRACE"),
        ([], {"HIVE_BASH_MAX_OUTPUT_BYTES": "0"}, b"HIVE_BASH_MAX_OUTPUT_BYTES"),
        (["--workdir", str(daemon.root / "missing")], {}, b"is not a directory"),
        (["--socket", "/tmp/" + "s" * 120], {}, b"choose a shorter --socket"),
    ]
    results: dict[int, subprocess.CompletedProcess[bytes]] = {}

    async def start(n: int, args: list[str], env: dict[str, str]) -> None:
        # All at once, each with a state dir of its own (no case can take another's lock).
        state_dir = daemon.root / f"state-{n}"
        results[n] = await trio.run_process(
            [sys.executable, "-m", "hive.bash.daemon", "--state-dir", str(state_dir), *args],
            env={**os.environ, **env},
            capture_stderr=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    async with trio.open_nursery() as nursery:
        for n, (args, env, _message) in enumerate(cases):
            nursery.start_soon(start, n, args, env)
    for n, (args, env, message) in enumerate(cases):
        assert results[n].returncode != 0, (args, env)
        assert message in results[n].stderr, (args, env, results[n].stderr)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@given(st.binary(max_size=200) | json_like.map(lambda v: json.dumps(v).encode()))
def test_misread_answers_only_a_line_that_is_json_and_never_raises(line: bytes) -> None:
    answer = misread(line, None)
    if answer is not None:
        error = json.loads(answer)
        assert error["error"]["code"] == -32602
        assert error["id"] is None or isinstance(error["id"], str | int)
