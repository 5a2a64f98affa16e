"""``hive-bash-mcp``: relays an MCP client's stdio to the bash daemon's Unix socket.

Standard library only, so it starts in the time of a bare interpreter: the daemon speaks MCP,
this moves lines, and reads just enough of each (its method and id) to stand in for a daemon
that is not there:

- It connects lazily: the first request tries the socket once, without waiting. With no
  daemon it answers ``initialize`` itself (protocol version negotiated as the SDK does,
  ``tools`` capability, serverInfo ``bash``), ``ping``, ``tools/list`` (the four tool names,
  each with an open schema) and ``tools/call`` (a tool error, ``isError: true``, naming the
  socket and the reason); any other request gets a JSON-RPC error saying the same. Every later
  request tries the socket again, so a daemon that comes back is used by the same relay: the
  relay replays the client's ``initialize`` (and ``notifications/initialized``) to it, drops
  the daemon's answer to that, sends ``notifications/tools/list_changed`` if it had listed the
  tools itself, and relays from there. A daemon that closes the connection is handled alike:
  requests it left unanswered get an error, and the next request reconnects.
- A request the daemon leaves unanswered for ``--reply-timeout`` seconds (default 45: the
  longest wait a call may ask for, 30 s, plus a margin) gets a JSON-RPC error
  (``-32001``) for its id, and a late answer to it is dropped; the relay goes on.
- A daemon that refuses the connection (its peer-uid check) says why in one line,
  :func:`refusal_line`; the relay answers every request then pending, and every later one,
  with a JSON-RPC error (``-32003``) carrying that reason, and never retries.
- A line that is not JSON gets a ``-32700`` error (id null) from the relay and goes no
  further; a JSON-RPC batch is relayed as its messages, one line each, and answered so.

It exits when stdin ends and every request relayed to the daemon has been answered (or has
timed out): with status 0 if it is then connected to the daemon (or never needed one), 1 if
the daemon was unreachable, went away or refused it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import sys
import time

from hive._limits import MAX_WAIT

try:
    from .. import __version__
except ImportError:  # run as a file, outside the hive package
    __version__ = "unknown"

READ_SIZE = 65536
REPLY_MARGIN = 15.0
REPLY_TIMEOUT = MAX_WAIT + REPLY_MARGIN
REPLY_TIMEOUT_ENV = "HIVE_BASH_RELAY_REPLY_TIMEOUT"
MAX_BUFFERED = 4 * 1024 * 1024
"""Bytes held for a daemon that is not reading before the relay stops reading stdin."""

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol versions the daemon's MCP SDK negotiates with ``initialize``, oldest first."""
TOOL_NAMES = ("run", "status", "stop", "list")

UNAVAILABLE = -32000
TIMED_OUT = -32001
REFUSED = -32003
INVALID_REQUEST = -32600
PARSE_ERROR = -32700

_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class _ClientGone(Exception):
    """The client closed our stdout."""


def refusal_line(reason: str) -> bytes:
    """The one line the daemon writes to a connection it refuses, before closing it."""
    error = {"code": REFUSED, "message": reason}
    return _line({"jsonrpc": "2.0", "id": None, "error": error})


def refusal_of(message: object) -> str | None:
    """The daemon's reason, if ``message`` is its :func:`refusal_line`."""
    if not isinstance(message, dict) or message.get("id") is not None or "method" in message:
        return None
    error = message.get("error")
    if isinstance(error, dict) and error.get("code") == REFUSED and isinstance(error.get("message"), str):
        return str(error["message"])
    return None


def negotiate(params: object) -> str:
    """The protocol version to answer ``initialize`` with: the client's, if the daemon speaks it."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def _line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no socket there (is hive-bash-daemon running?)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (the socket exists but no daemon is listening on it)"
    if isinstance(exc, PermissionError):
        return "permission denied (the daemon's socket belongs to another user)"
    if isinstance(exc, BlockingIOError):
        return "the daemon is not accepting connections (its listen queue is full; it may be wedged)"
    return exc.strerror or str(exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _is_id(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


class _Relay:
    def __init__(self, path: str, reply_timeout: float) -> None:
        self.path = path
        self.reply_timeout = reply_timeout
        self.sock: socket.socket | None = None
        self.to_daemon = bytearray()
        self.from_daemon = bytearray()
        self.from_client = bytearray()
        self.stdin_open = True
        self.shut = False
        # The client's handshake, replayed to a daemon reached after it.
        self.handshake: dict[str, object] | None = None
        self.initialized = False
        self.answered_initialize = False  # we answered it ourselves, advertising tools.listChanged
        self.listed_tools = False  # we answered tools/list ourselves since the last connection
        # Client requests sent to the daemon: id -> (deadline, id, method).
        self.pending: dict[object, tuple[float, object, str]] = {}
        # Our own requests to the daemon (the replayed initialize): id -> deadline.
        self.own: dict[str, float] = {}
        self.replays = 0
        self.reason = ""  # why the daemon is not reachable (empty: never tried, or connected)
        self.logged = ""
        self.refused: str | None = None

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            while self.stdin_open or self.pending:
                self._step()
            self._flush()  # best effort: what is left is not a request (a notification, say)
        except _ClientGone:
            pass
        if self.sock is not None:
            return 0
        return 1 if self.reason or self.refused else 0

    def _step(self) -> None:
        poller = select.poll()
        if self.stdin_open and len(self.to_daemon) < MAX_BUFFERED:
            poller.register(0, select.POLLIN)
        if self.sock is not None:
            poller.register(self.sock, select.POLLIN | (select.POLLOUT if self.to_daemon else 0))
        deadline = self._next_deadline()
        timeout = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
        events = dict(poller.poll(timeout))
        # The daemon's side first: a connection it has closed is seen before the next request.
        if self.sock is not None:
            ready = events.get(self.sock.fileno(), 0)
            if ready & select.POLLOUT:
                self._flush()
            if ready & _POLL_IN and self.sock is not None:
                self._read_daemon()
        if events.get(0, 0) & _POLL_IN:
            self._read_client()
        self._expire(time.monotonic())
        if not self.stdin_open and self.sock is not None and not self.to_daemon and not self.shut:
            # Tell the daemon the session is over; it still answers what it has read.
            self.shut = True
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def _next_deadline(self) -> float | None:
        deadlines = [entry[0] for entry in self.pending.values()] + list(self.own.values())
        return min(deadlines) if deadlines else None

    def _expire(self, now: float) -> None:
        for key, (deadline, request_id, method) in list(self.pending.items()):
            if deadline <= now:
                del self.pending[key]
                self._error(
                    request_id,
                    TIMED_OUT,
                    f"the bash daemon at {self.path} has not answered this {method} request within "
                    f"{self.reply_timeout:g} s, longer than any call may ask it to wait ({MAX_WAIT:g} s): "
                    "it may be wedged (see its log, or restart hive-bash-daemon). A late answer is "
                    "dropped; later requests are still sent to it.",
                )
        for own_id, deadline in list(self.own.items()):
            if deadline <= now:
                del self.own[own_id]
                self._log(f"the daemon at {self.path} did not answer the replayed initialize")

    # -- the client's side ------------------------------------------------------------------------

    def _read_client(self) -> None:
        try:
            data = os.read(0, READ_SIZE)
        except OSError:
            data = b""
        if data:
            self.from_client += data
            for line in _lines(self.from_client):
                self._client_line(line)
            return
        self.stdin_open = False
        if self.from_client:
            line = bytes(self.from_client)
            self.from_client.clear()
            self._client_line(line)

    def _client_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError as exc:
            self._error(None, PARSE_ERROR, f"not JSON: {exc}")
            return
        if isinstance(message, list):
            if not message:
                self._error(None, INVALID_REQUEST, "an empty batch")
            for item in message:
                self._client_message(item, None)
        else:
            self._client_message(message, line)

    def _client_message(self, message: object, raw: bytes | None) -> None:
        if not isinstance(message, dict):
            self._error(None, INVALID_REQUEST, "not a JSON-RPC message: expected an object")
            return
        method = message.get("method")
        request_id = message.get("id")
        is_request = isinstance(method, str) and request_id is not None
        if is_request:
            if not _is_id(request_id):
                self._error(None, INVALID_REQUEST, "a request's id must be a string or a number")
                return
            if method == "initialize":
                self.handshake = message
            if self.sock is None:
                self._connect(replay=method != "initialize")
        elif method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/cancelled":
            params = message.get("params")
            cancelled = params.get("requestId") if isinstance(params, dict) else None
            if _is_id(cancelled):
                self.pending.pop(cancelled, None)
        if self.sock is not None:
            if is_request:
                self.pending[request_id] = (time.monotonic() + self.reply_timeout, request_id, str(method))
            self._send(raw + b"\n" if raw is not None else _line(message))
        elif is_request:
            self._answer_alone(request_id, str(method), message.get("params"))
        # A notification or a response for a daemon that is not there has no one to go to.

    def _answer_alone(self, request_id: object, method: str, params: object) -> None:
        """Answer a request with no daemon to relay it to."""
        if self.refused is not None:
            self._error(request_id, REFUSED, self.refused)
            return
        message = (
            f"hive-bash-mcp cannot reach the bash daemon at {self.path}: {self.reason}. Start it with "
            "`hive-bash-daemon`, or point HIVE_BASH_SOCKET (or --socket) at its socket."
        )
        result: dict[str, object]
        if method == "initialize":
            self.answered_initialize = True
            result = {
                "protocolVersion": negotiate(params),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "bash", "version": __version__},
                "instructions": (
                    "Background shell execution: `run` starts a command, `status` checks on or waits "
                    "for a task, `stop` ends one, `list` shows them all. The bash daemon was not "
                    f"reachable when this session began ({self.path}: {self.reason}); each call "
                    "tries it again, and says why if it still cannot."
                ),
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            self.listed_tools = True
            description = (
                f"Unavailable for now: {message} Calling it tries the daemon again; the full "
                "description and schema come once it answers."
            )
            result = {
                "tools": [
                    {"name": name, "description": description, "inputSchema": {"type": "object"}}
                    for name in TOOL_NAMES
                ]
            }
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": message}], "isError": True}
        else:
            self._error(request_id, UNAVAILABLE, message)
            return
        self._write(_line({"jsonrpc": "2.0", "id": request_id, "result": result}))

    def _error(self, request_id: object, code: int, message: str) -> None:
        error = {"code": code, "message": message}
        self._write(_line({"jsonrpc": "2.0", "id": request_id, "error": error}))

    def _write(self, data: bytes) -> None:
        try:
            _write_all(1, data)
        except BrokenPipeError:
            raise _ClientGone from None

    # -- the daemon's side ------------------------------------------------------------------------

    def _connect(self, *, replay: bool) -> None:
        """Try the socket once, without waiting; on success, replay the client's handshake."""
        if self.refused is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            self.reason = _reason(exc)
            self._log(f"cannot reach the bash daemon at {self.path}: {self.reason}")
            return
        self.sock = sock
        self.shut = False
        self.reason = ""
        self.logged = ""
        if replay and self.handshake is not None:
            self.replays += 1
            own_id = f"hive-bash-mcp:replayed-initialize:{self.replays}"
            self.own[own_id] = time.monotonic() + self.reply_timeout
            replayed: dict[str, object] = {"jsonrpc": "2.0", "id": own_id, "method": "initialize"}
            if "params" in self.handshake:
                replayed["params"] = self.handshake["params"]
            self._send(_line(replayed))
            if self.initialized:
                self._send(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _send(self, data: bytes) -> None:
        self.to_daemon += data
        self._flush()

    def _flush(self) -> None:
        while self.to_daemon and self.sock is not None:
            try:
                sent = self.sock.send(self.to_daemon)
            except BlockingIOError:
                return
            except OSError as exc:
                # The daemon is gone; what it wrote before going (a refusal, say) is still to read.
                self.to_daemon.clear()
                while self.sock is not None and self._read_daemon():
                    pass
                if self.sock is not None:
                    self._lost(exc.strerror or str(exc))
                return
            del self.to_daemon[:sent]

    def _read_daemon(self) -> bool:
        """Take what the daemon wrote; False if there was nothing to take yet."""
        assert self.sock is not None
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return False
        except OSError as exc:
            self._lost(exc.strerror or str(exc))
            return True
        if not data:
            self._lost("the daemon closed the connection")
            return True
        self.from_daemon += data
        for line in _lines(self.from_daemon):
            if self.sock is None:
                break
            self._daemon_line(line)
        return True

    def _daemon_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message:
            reason = refusal_of(message)
            if reason is not None:
                self._refuse(reason)
                return
            request_id = message.get("id")
            if isinstance(request_id, str) and request_id in self.own:
                del self.own[request_id]
                if "error" in message:
                    self._log(f"the daemon refused the replayed initialize: {message['error']}")
                elif self.answered_initialize and self.listed_tools:
                    # The client holds our stand-in tool list: have it fetch the daemon's.
                    self.listed_tools = False
                    self._write(_line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
                return
            if _is_id(request_id) and self.pending.pop(request_id, None) is None:
                self._log(
                    f"dropped the daemon's answer to {request_id!r}: it came too late (or was cancelled)"
                )
                return
        self._write(line + b"\n")

    def _lost(self, why: str) -> None:
        self._close()
        self.reason = why
        for _deadline, request_id, method in self.pending.values():
            self._error(
                request_id,
                UNAVAILABLE,
                f"the bash daemon at {self.path} went away before answering this {method} request "
                f"({why}); whether it was carried out is unknown (`list` shows the tasks once it is "
                "back). The next request reconnects.",
            )
        self.pending.clear()

    def _refuse(self, reason: str) -> None:
        self._close()
        self.refused = f"hive-bash-mcp cannot use the bash daemon at {self.path}: {reason}"
        self._log(self.refused)
        for _deadline, request_id, _method in self.pending.values():
            self._error(request_id, REFUSED, self.refused)
        self.pending.clear()

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.to_daemon.clear()
        self.from_daemon.clear()
        self.own.clear()

    def _log(self, text: str) -> None:
        if text != self.logged:
            self.logged = text
            print(f"hive-bash-mcp: {text}", file=sys.stderr, flush=True)


def _lines(buffer: bytearray) -> list[bytes]:
    """Take the complete lines out of ``buffer``."""
    end = buffer.rfind(b"\n")
    if end < 0:
        return []
    lines = bytes(buffer[:end]).split(b"\n")
    del buffer[: end + 1]
    return lines


def default_socket() -> str:
    if os.environ.get("HIVE_BASH_SOCKET"):
        return os.environ["HIVE_BASH_SOCKET"]
    state = os.environ.get("HIVE_STATE_DIR")
    if not state:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        state = os.path.join(xdg, "hive")
    return os.path.join(state, "bash.sock")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


DESCRIPTION = """\
An MCP stdio server for background bash (run, status, stop, list), relayed to hive-bash-daemon's
Unix socket. Spawn it from an MCP client (e.g. claude's --mcp-config); it holds no state of its own.

It answers at once, daemon or not. It connects when the first request comes; with no daemon it
answers initialize itself, lists the four tools, and answers each call with a tool error naming
the socket and why it cannot be reached. Each later request tries again: once the daemon is back
the relay replays the client's initialize to it and relays from there, with no new relay needed.
A request the daemon leaves unanswered for the reply timeout gets a JSON-RPC error (-32001); a
daemon that refuses this relay's uid makes every request a JSON-RPC error (-32003) saying why.

Exit status, once stdin ends and every relayed request is answered: 0 if connected to the daemon
(or no request needed it), 1 if the daemon was unreachable, went away or refused the relay."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hive-bash-mcp", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--socket",
        default=None,
        help="the daemon's socket "
        "[HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]",
    )
    parser.add_argument(
        "--reply-timeout",
        type=_seconds,
        default=os.environ.get(REPLY_TIMEOUT_ENV) or str(REPLY_TIMEOUT),
        metavar="SECONDS",
        help="answer a request with an error if the daemon has not answered it in this long "
        f"[{REPLY_TIMEOUT_ENV}; default {REPLY_TIMEOUT:g}: the longest wait a call may ask for, "
        f"{MAX_WAIT:g} s, plus {REPLY_MARGIN:g} s]",
    )
    args = parser.parse_args(argv)
    relay = _Relay(args.socket or default_socket(), args.reply_timeout)
    try:
        return relay.run()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
