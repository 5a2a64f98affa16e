"""hive-bash-mcp: a standard-library relay from stdio to the daemon's socket, and its answers when there is none."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hive import __version__
from hive.bash import relay
from tests.helpers.daemon import DaemonHandle
from tests.helpers.jsonrpc import initialize, notification, open_relay, request, result_of

# A guard only: with no daemon the relay answers as soon as it reads a request.
ANSWER_WITHIN = 20


# -- importing ------------------------------------------------------------------------------------


def test_importing_the_relay_pulls_in_neither_trio_nor_mcp() -> None:
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import hive.bash.relay\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    loaded = json.loads(out.stdout)
    assert "hive.bash.relay" in loaded
    heavy = {"trio", "mcp", "mcp_types", "anyio", "pydantic", "attrs", "cattrs"}
    assert not [m for m in loaded if m.split(".")[0] in heavy]
    # Standard library only: everything it loads besides hive itself is in the standard library.
    foreign = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"hive"}
    assert not foreign


def test_help() -> None:
    script = Path(sys.executable).with_name("hive-bash-mcp")
    assert script.exists(), "the project is installed, so its console script is beside the interpreter"
    out = subprocess.run([script, "--help"], capture_output=True, text=True, check=False, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: hive-bash-mcp")
    assert "--socket" in out.stdout
    assert "HIVE_BASH_SOCKET" in out.stdout
    # What it does without a daemon, with a silent one, and its bound on the silence.
    assert "--reply-timeout" in out.stdout
    assert "HIVE_BASH_RELAY_REPLY_TIMEOUT" in out.stdout
    assert "answers initialize itself" in out.stdout
    assert "Exit status" in out.stdout


def test_the_relay_says_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        relay.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"hive-bash-mcp {__version__}\n"


def test_a_bad_reply_timeout_is_refused_with_a_usage_error() -> None:
    env = {**os.environ, "HIVE_BASH_RELAY_REPLY_TIMEOUT": "soon"}
    out = subprocess.run(
        [sys.executable, "-m", "hive.bash.relay"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        env=env,
    )
    assert out.returncode == 2
    assert "'soon' is not a positive number of seconds" in out.stderr


# -- splicing to a daemon -------------------------------------------------------------------------


async def test_relay_splices_raw_json_rpc_to_the_daemon_and_exits_0_when_stdin_closes(
    served: DaemonHandle, short_tmp: Path
) -> None:
    async with open_relay(served.socket, short_tmp / "relay.err") as relay:
        with trio.fail_after(30):
            await relay.send(initialize(1))
            init = result_of(await relay.receive(), 1)
            assert init["serverInfo"]["name"] == "bash"
            assert init["protocolVersion"]

            await relay.send(notification("notifications/initialized"), request(2, "tools/list"))
            listing = result_of(await relay.receive(), 2)
            assert {tool["name"] for tool in listing["tools"]} == {"run", "status", "stop", "list"}

            await relay.send(request(3, "tools/call", {"name": "run", "arguments": {"cmd": "echo spliced"}}))
            called = result_of(await relay.receive(), 3)
            assert not called.get("isError")
            status = called["structuredContent"]
            assert status["state"] == "done"
            assert status["exit_code"] == 0
            assert status["stdout"]["tail"] == "spliced\n"

            await relay.close_stdin()
            assert await relay.receive_all() == []
            assert await relay.process.wait() == 0


async def test_a_request_written_just_before_stdin_closes_is_still_answered(
    served: DaemonHandle, short_tmp: Path
) -> None:
    async with open_relay(served.socket, short_tmp / "relay.err") as relay:
        with trio.fail_after(30):
            await relay.send(initialize(1))
            result_of(await relay.receive(), 1)
            await relay.send(
                notification("notifications/initialized"),
                request(9, "tools/call", {"name": "list", "arguments": {}}),
            )
            before = [t["id"] for t in result_of(await relay.receive(), 9)["structuredContent"]["tasks"]]
            await relay.send(request(2, "tools/call", {"name": "run", "arguments": {"cmd": "echo first"}}))
            first = result_of(await relay.receive(), 2)["structuredContent"]
            # The client writes its last requests and closes stdin at once, as a one-shot client does.
            await relay.send(
                request(3, "tools/call", {"name": "list", "arguments": {}}),
                request(4, "tools/list"),
                request(5, "ping"),
            )
            await relay.close_stdin()
            answers = await relay.receive_all()
            assert await relay.process.wait() == 0
    assert sorted(a.get("id") for a in answers) == [3, 4, 5], answers
    for answer in answers:
        assert "error" not in answer, answer
    (listed,) = [a for a in answers if a["id"] == 3]
    tasks = result_of(listed, 3)["structuredContent"]["tasks"]
    assert [t["id"] for t in tasks] == [first["id"], *before]  # before: the module's other tasks


async def test_requests_written_before_the_daemon_exists_are_answered_at_once_and_later_ones_reach_it(
    daemon: DaemonHandle,
) -> None:
    async with open_relay(daemon.socket, daemon.root / "relay.err") as relay:
        with trio.fail_after(ANSWER_WITHIN):
            # Written while there is no daemon (nor socket): the relay answers them itself, at once.
            await relay.send(initialize("early"), notification("notifications/initialized"))
            await relay.send(request("list-early", "tools/list"))
            init = result_of(await relay.receive(), "early")
            listing = result_of(await relay.receive(), "list-early")
            assert not daemon.socket.exists()
            assert init["serverInfo"]["name"] == "bash"
            assert init["protocolVersion"] == "2025-11-25"  # the client's, which the daemon speaks too
            assert init["capabilities"]["tools"] == {"listChanged": True}
            assert str(daemon.socket) in init["instructions"]
            assert [tool["name"] for tool in listing["tools"]] == ["run", "status", "stop", "list"]
            for tool in listing["tools"]:
                assert tool["inputSchema"]["type"] == "object"
                assert str(daemon.socket) in tool["description"]

            async with daemon.running(agent=False):
                await relay.send(request(5, "tools/call", {"name": "run", "arguments": {"cmd": "echo late"}}))
                # The daemon's tools replace the stand-ins: the client is told to list them again ...
                assert await relay.receive() == notification("notifications/tools/list_changed")
                # ... and the daemon's answer to the replayed initialize is not passed on.
                assert result_of(await relay.receive(), 5)["structuredContent"]["stdout"]["tail"] == "late\n"
                await relay.send(request(6, "tools/list"))
                listing = result_of(await relay.receive(), 6)
                run = next(tool for tool in listing["tools"] if tool["name"] == "run")
                assert "cmd" in run["inputSchema"]["properties"]
                await relay.close_stdin()
                assert await relay.receive_all() == []
                assert await relay.process.wait() == 0


async def test_when_the_daemon_goes_away_the_relay_stays_and_uses_it_again_once_it_is_back(
    daemon: DaemonHandle,
) -> None:
    async with open_relay(daemon.socket, daemon.root / "relay.err") as relay:
        with trio.fail_after(30):
            async with daemon.running(agent=False) as process:
                await relay.send(initialize(1))
                assert result_of(await relay.receive(), 1)["serverInfo"]["name"] == "bash"
                await relay.send(notification("notifications/initialized"), request(2, "ping"))
                result_of(await relay.receive(), 2)
                process.send_signal(signal.SIGINT)
                await process.wait()
            # stdin stays open, and the relay stays: the next call says why it cannot be made.
            await relay.send(request(3, "tools/call", {"name": "list", "arguments": {}}))
            gone = result_of(await relay.receive(), 3)
            assert gone["isError"] is True
            assert str(daemon.socket) in gone["content"][0]["text"]
            assert relay.process.returncode is None
            async with daemon.running(agent=False):
                await relay.send(
                    request(4, "tools/call", {"name": "run", "arguments": {"cmd": "echo again"}})
                )
                again = result_of(await relay.receive(), 4)
                assert not again.get("isError"), again
                assert again["structuredContent"]["stdout"]["tail"] == "again\n"
                await relay.close_stdin()
                assert await relay.receive_all() == []
                assert await relay.process.wait() == 0


# -- no daemon ------------------------------------------------------------------------------------


async def test_with_no_daemon_the_relay_answers_for_it_and_names_the_socket(short_tmp: Path) -> None:
    path = short_tmp / "absent.sock"
    async with open_relay(path, short_tmp / "relay.err") as relay:
        with trio.fail_after(ANSWER_WITHIN):
            await relay.send(
                request(
                    1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
                ),
                notification("notifications/initialized"),
                [request(2, "tools/list"), notification("notifications/cancelled"), request("three", "ping")],
            )
            answers = {}
            for _ in range(3):
                answer = await relay.receive()
                answers[answer["id"]] = answer
            await relay.send(request(4, "tools/call", {"name": "run", "arguments": {"cmd": "true"}}))
            called = result_of(await relay.receive(), 4)
            await relay.send(request(5, "resources/list"))
            other = await relay.receive()
            await relay.send(notification("notifications/initialized"))
            await relay.close_stdin()
            assert await relay.receive_all() == []  # no answer to a notification
            code = await relay.process.wait()
    # No daemon at the end: the relay says so in its exit status.
    assert code == 1
    init = result_of(answers[1], 1)
    assert init["protocolVersion"] == "2025-06-18"  # echoed: the daemon speaks it
    assert init["serverInfo"]["name"] == "bash"
    assert "tools" in init["capabilities"]
    assert [t["name"] for t in result_of(answers[2], 2)["tools"]] == ["run", "status", "stop", "list"]
    assert result_of(answers["three"], "three") == {}
    # A call is a tool error the model reads: it names the socket, the reason and the remedy.
    assert called["isError"] is True
    (text,) = [block["text"] for block in called["content"] if block["type"] == "text"]
    assert str(path) in text
    assert "no socket there" in text
    assert "hive-bash-daemon" in text
    # What only a daemon could answer is a JSON-RPC error saying the same.
    assert other["id"] == 5
    assert "result" not in other
    assert other["error"]["code"] == -32000
    assert str(path) in other["error"]["message"]
    assert "no socket there" in other["error"]["message"]
    assert str(path) in relay.stderr_text()


async def test_with_a_stale_socket_file_the_reason_is_connection_refused(short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # bound, never listening: what a crashed daemon leaves behind
    stale.close()
    assert path.exists()
    async with open_relay(path, short_tmp / "relay.err") as relay:
        with trio.fail_after(ANSWER_WITHIN):
            await relay.send(initialize(7), request(8, "tools/call", {"name": "list", "arguments": {}}))
            await relay.close_stdin()
            init, called = await relay.receive_all()
            assert await relay.process.wait() == 1
    assert result_of(init, 7)["serverInfo"]["name"] == "bash"
    text = result_of(called, 8)["content"][0]["text"]
    assert str(path) in text
    assert "connection refused" in text
