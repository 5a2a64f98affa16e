"""hive-bash-mcp: a standard-library splice from stdio to the daemon's socket, and its answers when there is none."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio

from tests.conftest import DaemonHandle, relay_argv

# How long a relay may take to give up on an absent daemon: its 5 s connect window, plus slack.
REFUSAL_WITHIN = 20


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def initialize(request_id: Any) -> dict[str, Any]:
    return request(
        request_id,
        "initialize",
        {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "test-relay", "version": "0"},
        },
    )


@attrs.define
class Relay:
    """A relay subprocess, spoken to in raw newline-delimited JSON-RPC."""

    process: trio.Process
    stderr_path: Path
    _buffer: bytearray = attrs.field(factory=bytearray)
    _eof: bool = False

    async def send(self, *messages: Any) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def _fill(self) -> bool:
        assert self.process.stdout is not None
        data = await self.process.stdout.receive_some(65536)
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    async def receive(self) -> dict[str, Any]:
        """The next JSON-RPC message the relay writes."""
        while (end := self._buffer.find(b"\n")) < 0:
            if not await self._fill():
                raise AssertionError(f"the relay's stdout ended; stderr: {self.stderr_text()!r}")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        message: dict[str, Any] = json.loads(line)
        return message

    async def receive_all(self) -> list[dict[str, Any]]:
        """Every message until the relay closes its stdout."""
        while not self._eof:
            await self._fill()
        assert self._buffer.endswith(b"\n") or not self._buffer, bytes(self._buffer)
        messages = [json.loads(line) for line in self._buffer.splitlines() if line.strip()]
        self._buffer.clear()
        return messages

    def stderr_text(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""


@asynccontextmanager
async def open_relay(socket_path: Path, stderr_path: Path) -> AsyncIterator[Relay]:
    with open(stderr_path, "ab") as err:
        process = await trio.lowlevel.open_process(
            relay_argv(socket_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
    try:
        yield Relay(process, stderr_path)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()


def result_of(message: dict[str, Any], request_id: Any) -> dict[str, Any]:
    assert message.get("id") == request_id, message
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    return result


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


# -- splicing to a daemon -------------------------------------------------------------------------


async def test_relay_splices_raw_json_rpc_to_the_daemon_and_exits_0_when_stdin_closes(
    daemon: DaemonHandle,
) -> None:
    async with daemon.running(agent=False), open_relay(daemon.socket, daemon.root / "relay.err") as relay:
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


async def test_a_request_written_just_before_stdin_closes_is_still_answered(daemon: DaemonHandle) -> None:
    async with daemon.running(agent=False), open_relay(daemon.socket, daemon.root / "relay.err") as relay:
        with trio.fail_after(30):
            await relay.send(initialize(1))
            result_of(await relay.receive(), 1)
            await relay.send(
                notification("notifications/initialized"),
                request(2, "tools/call", {"name": "run", "arguments": {"cmd": "echo first"}}),
            )
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
    assert [t["id"] for t in tasks] == [first["id"]]


async def test_relay_reaches_a_daemon_that_starts_within_its_connect_window(daemon: DaemonHandle) -> None:
    async with open_relay(daemon.socket, daemon.root / "relay.err") as relay:
        with trio.fail_after(30):
            # Written while there is no daemon (nor socket) yet: the relay must hold on to them.
            await relay.send(initialize("early"), notification("notifications/initialized"))
            await relay.send(request("list-early", "tools/list"))
            assert not daemon.socket.exists()
            async with daemon.running(agent=False):
                init = result_of(await relay.receive(), "early")
                assert init["serverInfo"]["name"] == "bash"
                listing = result_of(await relay.receive(), "list-early")
                assert {tool["name"] for tool in listing["tools"]} == {"run", "status", "stop", "list"}
                await relay.send(request(5, "tools/call", {"name": "run", "arguments": {"cmd": "echo late"}}))
                assert result_of(await relay.receive(), 5)["structuredContent"]["stdout"]["tail"] == "late\n"
                await relay.close_stdin()
                assert await relay.receive_all() == []
                assert await relay.process.wait() == 0


async def test_relay_exits_when_the_daemon_goes_away(daemon: DaemonHandle) -> None:
    async with (
        daemon.running(agent=False) as process,
        open_relay(daemon.socket, daemon.root / "relay.err") as relay,
    ):
        with trio.fail_after(30):
            await relay.send(initialize(1))
            result_of(await relay.receive(), 1)
            process.send_signal(signal.SIGINT)
            await process.wait()
            # stdin stays open: the relay notices the socket closing on its own.
            assert await relay.receive_all() == []
            # The daemon closed the connection in an orderly way: the relay's session is over, not failed.
            assert await relay.process.wait() == 0


# -- no daemon ------------------------------------------------------------------------------------


async def test_with_no_daemon_every_request_is_answered_with_an_error_naming_the_socket(
    short_tmp: Path,
) -> None:
    path = short_tmp / "absent.sock"
    async with open_relay(path, short_tmp / "relay.err") as relay:
        with trio.fail_after(REFUSAL_WITHIN):
            await relay.send(
                initialize(1),
                notification("notifications/initialized"),
                [request(2, "tools/list"), notification("notifications/cancelled"), request("three", "ping")],
            )
            # Answers to what was sent during the connect window come once the window is over.
            answers = [await relay.receive() for _ in range(3)]
            # ... and later requests are answered as they come.
            await relay.send(request(4, "tools/call", {"name": "list", "arguments": {}}))
            answers.append(await relay.receive())
            await relay.send(notification("notifications/initialized"))
            await relay.close_stdin()
            assert await relay.receive_all() == []  # no answer to a notification
            code = await relay.process.wait()
    assert code == 1
    assert [a["id"] for a in answers] == [1, 2, "three", 4]
    for answer in answers:
        assert answer["jsonrpc"] == "2.0"
        assert "result" not in answer
        message = answer["error"]["message"]
        assert str(path) in message
        assert "no socket there" in message
        assert isinstance(answer["error"]["code"], int)
    assert str(path) in relay.stderr_text()


async def test_with_a_stale_socket_file_the_reason_is_connection_refused(short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # bound, never listening: what a crashed daemon leaves behind
    stale.close()
    assert path.exists()
    async with open_relay(path, short_tmp / "relay.err") as relay:
        with trio.fail_after(REFUSAL_WITHIN):
            await relay.send(initialize(7))
            await relay.close_stdin()
            (answer,) = await relay.receive_all()
            await relay.process.wait()
    assert answer["id"] == 7
    assert str(path) in answer["error"]["message"]
    assert "connection refused" in answer["error"]["message"]
