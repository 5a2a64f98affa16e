"""hive-bash-mcp when the daemon is not there, wedged, goes away mid-request, or refuses the relay.

The real relay throughout (spawned by the MCP SDK's stdio client, or spoken to in raw JSON-RPC);
the daemon is the real one, or a Unix listener the test scripts to do what a real one would not.
"""

from __future__ import annotations

import json
import os
import socket
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import pytest
import trio
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from hive import daemon as kit
from hive._limits import MAX_WAIT
from hive.bash import TOOLS, _server
from hive.bash import relay as forms
from hive.daemon import relay
from tests.helpers.daemon import DaemonHandle
from tests.helpers.jsonrpc import initialize, notification, open_relay, request, result_of
from tests.helpers.results import call, structured, text_of

# A guard only: every wait below is for an answer the relay gives as soon as it knows it.
GUARD = 30
TIMEOUT_ENV = "HIVE_BASH_RELAY_REPLY_TIMEOUT"


# -- a scripted daemon ----------------------------------------------------------------------------


class Connection:
    """One connection to the scripted daemon: newline-delimited JSON-RPC."""

    def __init__(self, stream: trio.SocketStream, number: int) -> None:
        self.stream = stream
        self.number = number
        self._buffer = bytearray()

    async def receive(self) -> dict[str, Any] | None:
        """The next message, or None when the relay closes its side."""
        while (end := self._buffer.find(b"\n")) < 0:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self._buffer += data
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        message: dict[str, Any] = json.loads(line)
        return message

    async def send(self, message: dict[str, Any]) -> None:
        await self.stream.send_all(json.dumps(message).encode() + b"\n")

    async def answer(self, message: dict[str, Any], result: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})


Script = Callable[[Connection], Awaitable[None]]


@attrs.define
class ScriptedDaemon:
    connections: int = 0


@asynccontextmanager
async def scripted_daemon(path: Path, script: Script) -> AsyncIterator[ScriptedDaemon]:
    """A Unix listener at ``path`` that plays ``script`` on each connection it accepts."""
    state = ScriptedDaemon()
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(16)
    listener = trio.SocketListener(sock)

    async def serve(stream: trio.SocketStream) -> None:
        state.connections += 1
        async with stream:
            await script(Connection(stream, state.connections))

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, serve, [listener])
        yield state
        nursery.cancel_scope.cancel()
    path.unlink(missing_ok=True)


async def wedged(connection: Connection) -> None:
    """A daemon that accepts, and then neither reads nor answers."""
    await trio.sleep_forever()


INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "scripted", "version": "0"},
}


# -- no daemon, then a daemon ---------------------------------------------------------------------


async def test_with_no_daemon_a_session_starts_at_once_and_its_next_call_works_once_the_daemon_is_up(
    daemon: DaemonHandle,
) -> None:
    with trio.fail_after(GUARD):
        async with daemon.session() as session:
            # The relay answered the handshake itself: there is no socket it could have asked.
            assert not daemon.socket.exists()
            init = session.initialize_result
            assert init is not None
            assert init.server_info.name == "bash"
            assert init.capabilities.tools is not None
            listing = await session.list_tools()
            assert [tool.name for tool in listing.tools] == ["run", "status", "stop", "list"]

            early = await call(session, "run", cmd="echo early")
            assert early.is_error
            assert str(daemon.socket) in text_of(early)
            assert "no socket there" in text_of(early)
            assert "hive-bash-daemon" in text_of(early)

            async with daemon.running(agent=False):
                # The same session, the same relay: no new spawn, no wait.
                late = await call(session, "run", cmd="echo late")
                assert not late.is_error, text_of(late)
                assert structured(late)["stdout"]["tail"] == "late\n"
                # The daemon's own tools, with their schemas, now that it is there.
                listing = await session.list_tools()
                run = next(tool for tool in listing.tools if tool.name == "run")
                assert "cmd" in run.input_schema["properties"]


# -- a wedged daemon ------------------------------------------------------------------------------


async def test_a_call_a_wedged_daemon_never_answers_gets_an_error_after_the_bound_and_the_relay_goes_on(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    with trio.fail_after(GUARD):
        async with daemon.session() as session:
            async with scripted_daemon(daemon.socket, wedged) as listener:
                with pytest.raises(MCPError) as raised:
                    await call(session, "status", id="anything")
                assert listener.connections == 1
                # Still connected to it: the next request waits out the bound too, on its own.
                with pytest.raises(MCPError) as again:
                    await session.send_ping()
                assert listener.connections == 1
            error = raised.value.error
            assert error.code == types.REQUEST_TIMEOUT
            assert str(daemon.socket) in error.message
            assert "0.5 s" in error.message
            assert "tools/call" in error.message
            assert again.value.error.code == types.REQUEST_TIMEOUT
            # The wedged listener is gone (its socket too): the relay says so, as for no daemon.
            gone = await call(session, "status", id="anything")
            assert gone.is_error
            assert str(daemon.socket) in text_of(gone)


async def test_the_daemon_s_late_answer_to_a_timed_out_request_is_dropped(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    path = short_tmp / "slow.sock"
    held_send, held = trio.open_memory_channel[tuple[Connection, dict[str, Any]]](1)

    async def slow(connection: Connection) -> None:
        while (message := await connection.receive()) is not None:
            if message.get("method") == "initialize":
                await connection.answer(message, INIT_RESULT)
            elif message.get("method") == "tools/call":
                await held_send.send((connection, message))
            elif message.get("method") == "ping":
                await connection.answer(message, {})

    async with scripted_daemon(path, slow), open_relay(path, short_tmp / "relay.err") as client:
        with trio.fail_after(GUARD):
            await client.send(initialize(1))
            assert result_of(await client.receive(), 1)["serverInfo"]["name"] == "scripted"
            await client.send(request(2, "tools/call", {"name": "status", "arguments": {"id": "x"}}))
            timed_out = await client.receive()
            assert timed_out["id"] == 2
            assert timed_out["error"]["code"] == relay.TIMED_OUT
            # Now the daemon answers after all, and then answers a ping.
            connection, call_request = await held.receive()
            await connection.answer(call_request, {"content": [], "isError": False})
            await client.send(request(3, "ping"))
            # The client sees the ping's answer next: never a second answer to request 2.
            assert result_of(await client.receive(), 3) == {}
            await client.close_stdin()
            assert await client.receive_all() == []
            assert await client.process.wait() == 0
    assert "came too late" in client.stderr_text()


# -- a daemon that goes away mid-request ------------------------------------------------------------


async def test_a_request_the_daemon_left_unanswered_by_going_away_gets_an_error_and_the_next_reconnects(
    short_tmp: Path,
) -> None:
    path = short_tmp / "flaky.sock"
    seen: list[list[dict[str, Any]]] = []

    async def flaky(connection: Connection) -> None:
        messages: list[dict[str, Any]] = []
        seen.append(messages)
        while (message := await connection.receive()) is not None:
            messages.append(message)
            if message.get("method") == "initialize":
                await connection.answer(message, INIT_RESULT)
            elif message.get("method") == "tools/call":
                if connection.number == 1:
                    return  # closes the connection with the call unanswered
                await connection.answer(message, {"content": [{"type": "text", "text": "second"}]})

    async with scripted_daemon(path, flaky) as listener, open_relay(path, short_tmp / "relay.err") as client:
        with trio.fail_after(GUARD):
            client_init = initialize(1)
            await client.send(client_init, notification("notifications/initialized"))
            result_of(await client.receive(), 1)
            await client.send(request(2, "tools/call", {"name": "run", "arguments": {"cmd": "true"}}))
            lost = await client.receive()
            await client.send(request(3, "tools/call", {"name": "list", "arguments": {}}))
            second = result_of(await client.receive(), 3)
            await client.close_stdin()
            assert await client.receive_all() == []
            assert await client.process.wait() == 0
    assert lost["id"] == 2
    assert lost["error"]["code"] == relay.UNAVAILABLE
    assert str(path) in lost["error"]["message"]
    assert "went away before answering" in lost["error"]["message"]
    assert second["content"][0]["text"] == "second"
    assert listener.connections == 2
    # The relay replayed the client's own handshake to the daemon it reached again.
    replayed, initialized, call_3 = seen[1]
    assert replayed["method"] == "initialize"
    assert replayed["params"] == client_init["params"]
    assert replayed["id"] != 1
    assert initialized == notification("notifications/initialized")
    assert call_3["id"] == 3


# -- refused by the uid check ---------------------------------------------------------------------


async def test_the_relay_passes_on_a_refusal_as_a_json_rpc_error_and_does_not_retry(short_tmp: Path) -> None:
    path = short_tmp / "refusing.sock"
    reason = "refused: peer uid 1234 is neither the daemon's uid 999 nor root"

    async def refusing(connection: Connection) -> None:
        # The daemon's refusal, as it goes on the wire: an error with a null id and its own code.
        await connection.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32003, "message": reason}})
        await connection.stream.send_eof()
        while await connection.receive() is not None:
            pass

    async with (
        scripted_daemon(path, refusing) as listener,
        open_relay(path, short_tmp / "relay.err") as client,
    ):
        with trio.fail_after(GUARD):
            await client.send(initialize(1))
            refused_init = await client.receive()
            await client.send(request(2, "tools/call", {"name": "list", "arguments": {}}), request(3, "ping"))
            refused_call, refused_ping = await client.receive(), await client.receive()
            await client.close_stdin()
            assert await client.receive_all() == []
            assert await client.process.wait() == 1
    for answer, request_id in ((refused_init, 1), (refused_call, 2), (refused_ping, 3)):
        assert answer["id"] == request_id
        assert "result" not in answer
        assert answer["error"]["code"] == relay.REFUSED
        assert reason in answer["error"]["message"]
        assert str(path) in answer["error"]["message"]
    assert listener.connections == 1  # a refusal is final: no retry per request
    assert reason in client.stderr_text()


async def test_the_daemon_tells_a_peer_its_uid_check_refuses_why_and_the_relay_says_so(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, nursery: trio.Nursery
) -> None:
    # Running the relay as another user needs root and a world-readable interpreter; instead
    # the daemon is told the peer is a stranger, and the rest is the real daemon code path.
    stranger = 65534 if os.getuid() != 65534 else 65533
    monkeypatch.setattr("hive.daemon._serve.peer_uid", lambda sock: stranger)
    path = short_tmp / "bash.sock"
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(16)
    await nursery.start(kit.serve_mcp, trio.SocketListener(sock), _server.make_mcp_server(None))  # type: ignore[arg-type]
    async with open_relay(path, short_tmp / "relay.err") as client:
        with trio.fail_after(GUARD):
            await client.send(initialize(1))
            answer = await client.receive()
            await client.close_stdin()
            assert await client.receive_all() == []
            assert await client.process.wait() == 1
    assert answer["id"] == 1
    assert answer["error"]["code"] == relay.REFUSED
    message = answer["error"]["message"]
    assert f"peer uid {stranger} is neither the daemon's uid {os.getuid()} nor root" in message
    assert str(path) in message


def relay_as_uid(path: str, uid: int, requests: bytes) -> tuple[int, bytes]:
    """Run the relay's own code as ``uid`` in a forked child (which needs no executable that uid
    may run): ``requests`` on its stdin, then end of input. Its exit status and its stdout."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() with threads; the child runs only the relay and exits.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.dup2(stdin_read, 0)
            os.dup2(stdout_write, 1)
            for fd in (stdin_read, stdin_write, stdout_read, stdout_write):
                os.close(fd)
            os.setgid(uid)
            os.setuid(uid)
            code = forms.main(["--socket", path])
        finally:
            os._exit(code)
    os.close(stdin_read)
    os.close(stdout_write)
    with os.fdopen(stdin_write, "wb") as to_relay:
        to_relay.write(requests)
    with os.fdopen(stdout_read, "rb") as from_relay:
        output = from_relay.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output


@pytest.mark.skipif(os.getuid() != 0, reason="running the relay as another uid needs root")
async def test_a_relay_of_another_uid_hears_from_the_real_daemon_why_it_is_refused(
    daemon: DaemonHandle,
) -> None:
    stranger = 65534
    requests = b"".join(
        json.dumps(message).encode() + b"\n"
        for message in (initialize(1), request(2, "tools/call", {"name": "list", "arguments": {}}))
    )
    with trio.fail_after(GUARD):
        async with daemon.running(agent=False):
            # Let the stranger reach the socket, so that only the uid check stands in its way.
            os.chmod(daemon.root, 0o755)
            os.chmod(daemon.socket, 0o666)
            code, output = await trio.to_thread.run_sync(relay_as_uid, str(daemon.socket), stranger, requests)
    answers = [json.loads(line) for line in output.splitlines()]
    assert code == 1
    assert [answer["id"] for answer in answers] == [1, 2]
    for answer in answers:
        assert answer["error"]["code"] == relay.REFUSED
        message = answer["error"]["message"]
        assert f"peer uid {stranger} is neither the daemon's uid {os.getuid()} nor root" in message
        assert str(daemon.socket) in message
    assert f"refused a connection from uid {stranger}" in daemon.stderr_text()


def test_the_refusal_names_both_uids_and_its_line_is_what_the_relay_recognises() -> None:
    assert kit.refusal(1000, 1000, _server.REFUSAL_HINT) is None
    assert kit.refusal(0, 1000, _server.REFUSAL_HINT) is None
    reason = kit.refusal(1001, 1000, _server.REFUSAL_HINT)
    assert reason is not None
    assert reason.startswith("refused: peer uid 1001 is neither the daemon's uid 1000 nor root")
    assert "run the MCP client as uid 1000 (or root)" in reason
    line = kit.refusal_line(reason)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    message = json.loads(line)
    assert message["id"] is None
    assert relay.refusal_of(message) == reason
    # Nothing else the daemon writes is taken for one.
    parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "refused"}}
    assert relay.refusal_of(parse_error) is None
    answer = {"jsonrpc": "2.0", "id": 1, "error": {"code": relay.REFUSED, "message": "x"}}
    assert relay.refusal_of(answer) is None


async def test_refuse_connection_writes_the_line_even_to_a_peer_that_has_already_written(
    short_tmp: Path,
) -> None:
    left, right = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    daemon_side, peer_side = trio.SocketStream(left), trio.SocketStream(right)
    # The relay writes its request before reading anything.
    await peer_side.send_all(json.dumps(initialize(1)).encode() + b"\n")
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kit.refuse_connection, daemon_side, "refused: because")
            received = b""
            while data := await peer_side.receive_some(65536):
                received += data
            await peer_side.aclose()
    await daemon_side.aclose()
    assert relay.refusal_of(json.loads(received)) == "refused: because"


# -- what the relay must agree on with the daemon ---------------------------------------------------


def test_the_relay_agrees_with_the_daemon_on_versions_tools_and_the_longest_wait() -> None:
    assert kit.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert kit.negotiate({"protocolVersion": "2025-03-26"}) == "2025-03-26"
    assert kit.negotiate({"protocolVersion": "1999-01-01"}) == LATEST_HANDSHAKE_VERSION
    assert kit.negotiate(None) == LATEST_HANDSHAKE_VERSION
    assert tuple(spec.name for spec in TOOLS) == forms.TOOL_NAMES
    assert relay.MAX_WAIT == MAX_WAIT
    assert relay.REPLY_TIMEOUT == MAX_WAIT + 15


async def test_a_line_that_is_not_json_gets_a_parse_error_and_the_relay_goes_on(short_tmp: Path) -> None:
    async with open_relay(short_tmp / "absent.sock", short_tmp / "relay.err") as client:
        with trio.fail_after(GUARD):
            assert client.process.stdin is not None
            await client.process.stdin.send_all(b"{not json\n")
            garbage = await client.receive()
            await client.send(initialize(1))
            init = result_of(await client.receive(), 1)
    assert garbage["id"] is None
    assert garbage["error"]["code"] == -32700
    assert init["serverInfo"]["name"] == "bash"
