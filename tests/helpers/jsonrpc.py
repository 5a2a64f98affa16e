"""Raw newline-delimited JSON-RPC: messages, an MCP session on the daemon's socket itself, the
relay as a subprocess, one-shot exchanges on a fresh connection."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio

from hive.agent_socket import LineReader
from tests.helpers.daemon import relay_argv


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


async def send(stream: trio.SocketStream, *messages: Any) -> None:
    await stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


async def answer(reader: LineReader, request_id: int) -> dict[str, Any]:
    """The result of request ``request_id`` (the next line on a connection that asked only it)."""
    line = await reader.readline()
    assert line is not None, "the daemon closed the connection"
    message: dict[str, Any] = json.loads(line)
    assert message.get("id") == request_id, message
    result: dict[str, Any] = message["result"]
    return result


async def open_raw_session(path: Path) -> tuple[trio.SocketStream, LineReader]:
    """An MCP session on the daemon's socket itself, spoken in raw JSON-RPC lines."""
    stream = await trio.open_unix_socket(str(path))
    reader = LineReader(stream)
    try:
        await send(stream, initialize(1))
        await answer(reader, 1)
        await send(stream, notification("notifications/initialized"))
    except BaseException:
        # The daemon died mid-handshake (the crash test kills it): close, or the socket is
        # left to the garbage collector, whose ResourceWarning fails a later test.
        await trio.aclose_forcefully(stream)
        raise
    return stream, reader


def run_request(request_id: int, **arguments: Any) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "run", "arguments": arguments})


def raw_exchange(path: str, payload: bytes, half_close: bool = True, *, hang_up: bool = False) -> bytes:
    """Send ``payload`` on a fresh connection and read until the daemon closes it (with
    ``hang_up``, close it at once instead, and read nothing)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(path)
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon hung up before taking it all; what it answered is still to be read
        if hang_up:
            return b""
        chunks = []
        with suppress(ConnectionResetError):  # it hung up on bytes it did not read: as a close
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


def answers_initialize(path: str, server: str = "bash") -> bool:
    """Whether the MCP server ``server`` answers ``initialize`` on the socket ``path``."""
    reply = raw_exchange(path, INITIALIZE)
    return json.loads(reply.splitlines()[0])["result"]["serverInfo"]["name"] == server
