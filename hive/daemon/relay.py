"""The kit's stdio relay: an MCP client's stdio moved to a daemon's Unix socket. Each form
(``hive-bash-mcp``, ``hive-hyperhive-mcp``, ``hive-subagent-mcp``) is this relay with a
:class:`Relayed` of its own, which says what its stand-in and its messages say.

Standard library only, so it starts in the time of a bare interpreter: the daemon speaks MCP,
this moves lines, and reads just enough of each (its method and id) to stand in for a daemon
that is not there:

- It connects lazily: the first request tries the socket once, without waiting; a form that
  starts its daemon on first use (``start``) starts it then, and tries once more. With no
  daemon it answers ``initialize`` itself (protocol version negotiated as the daemon does,
  ``tools`` capability, the server's name), ``ping``, ``tools/list`` (the tool names, each
  with an open schema) and ``tools/call`` (a tool error, ``isError: true``, naming the socket
  and the reason, or, while the ``--outage-file`` of the hive-agent that supervises the
  daemon is there, that file's words); any other request gets a JSON-RPC error saying the
  same. Every later request tries the socket again, so a daemon that comes back is used by
  the same relay: the relay replays the client's ``initialize`` (and
  ``notifications/initialized``) to it, drops the daemon's answer to that, sends
  ``notifications/tools/list_changed`` if it had listed the tools itself, and relays from
  there. A daemon that closes the connection is handled alike: requests it left unanswered
  get an error, and the next request reconnects.
- What the daemon is to know of the relay's caller once per connection (``caller``: the
  subagent form's working directory, environment and agent socket) goes in the ``_meta`` of
  the ``initialize`` it relays (and replays), under :data:`CALLER_META`.
- A request the daemon leaves unanswered for ``--reply-timeout`` seconds (default 45: the
  longest wait a call may ask for, 30 s, plus a margin) gets a JSON-RPC error
  (``-32001``) for its id, and a late answer to it is dropped; the relay goes on.
- A daemon that refuses the connection (its peer-uid check) says why in one line,
  :func:`hive.daemon.refusal_line`; the relay answers every request then pending, and every later one,
  with a JSON-RPC error (``-32003``) carrying that reason, and never retries.
- A line that is not JSON gets a ``-32700`` error (id null) from the relay and goes no
  further; a JSON-RPC batch is relayed as its messages, one line each, and answered so.
- Under a ``TRACEPARENT`` (the agent's turn's span, which the agent's MCP servers inherit), a
  ``tools/call`` that names no span of its own goes with that one in its ``_meta.traceparent``:
  a task it starts is a span of the turn's trace (`ClientMessage.in_trace`).
- A client that closes the relay's stdout has stopped reading: the relay ends at once, so the
  daemon learns that no answer still owed reaches the agent (an end it carries is then told
  by a wake).

It exits when stdin ends and every request relayed to the daemon has been answered (or has
timed out): with status 0 if it is then connected to the daemon (or never needed one), 1 if
the daemon was unreachable, went away or refused it.

What the relay decides is in small pieces without I/O, each with one job: ``read_client_line``
checks what the client sends, ``Owed`` keeps the answers the daemon owes and their deadlines,
``Handshake`` the client's handshake and its replay, ``StandIn`` answers for an absent daemon.
``Relay`` only polls the two ends (``_Client``, ``_Daemon``) and moves lines between them.
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
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from hive import __version__
from hive._limits import MAX_WAIT
from hive._main import run_main
from hive._outage import read_outage
from hive._when import in_seconds
from hive.daemon.protocol import INVALID_REQUEST, PARSE_ERROR, REFUSED, negotiate, refusal_of

READ_SIZE = 65536
REPLY_MARGIN = 15.0
REPLY_TIMEOUT = MAX_WAIT + REPLY_MARGIN
MAX_BUFFERED = 4 * 1024 * 1024
"""Bytes held for a daemon that is not reading before the relay stops reading stdin."""
CALLER_META = "hive/caller"
"""The key, in the ``_meta`` of the ``initialize`` a relay sends its daemon, of what the daemon
is to know of the relay's caller."""


class Relayed(NamedTuple):
    """Which server a relay stands for: its program's name, the server's MCP name and tools, and
    the words of what the relay says when the server does not answer."""

    program: str
    """The relay's own name (its log's prefix, its replayed initialize's id)."""
    server: str
    """The MCP server's name (the stand-in's serverInfo)."""
    tools: tuple[str, ...]
    what: str
    """The server as a message names it: "cannot reach <what> at <socket>"."""
    server_program: str
    """The program that serves the socket."""
    summary: str
    """What the tools do, as the stand-in's instructions begin."""
    absent_hint: str
    """What to do about an unreachable server."""
    timeout_hint: str
    """What to make of a request left unanswered for the reply timeout."""
    lost_hint: str
    """How to tell what came of a request the server went away from."""


UNAVAILABLE = -32000
TIMED_OUT = -32001

_POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR


class _NotStarted(Exception):
    """The daemon could not be started (the message says why)."""


class _ClientGone(Exception):
    """The client closed our stdout."""


def _line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _reason(exc: OSError, relayed: Relayed) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no socket there (is {relayed.server_program} running?)"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused (the socket exists but no {relayed.server_program} is listening on it)"
    if isinstance(exc, PermissionError):
        return f"permission denied (the socket of {relayed.what} belongs to another user)"
    if isinstance(exc, BlockingIOError):
        return f"{relayed.server_program} is not accepting connections (its listen queue is full; it may be wedged)"
    return exc.strerror or str(exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _is_id(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


# -- what comes from the client: lines into messages ---------------------------------------------


class Invalid:
    """A client line or message that goes no further: the error the relay answers it with."""

    __slots__ = ("code", "text")

    def __init__(self, code: int, text: str) -> None:
        self.code = code
        self.text = text


class ClientMessage:
    """A JSON-RPC message from the client, read just enough to route it."""

    __slots__ = ("message", "method", "raw", "request_id")

    def __init__(self, message: dict[str, object], raw: bytes | None) -> None:
        self.message = message
        self.raw = raw
        """The line it came as (None for a message of a batch): relayed as it is."""
        method = message.get("method")
        self.method = method if isinstance(method, str) else None
        request_id = message.get("id")
        self.request_id = request_id if self.method is not None else None
        """Not None for a request, which is owed an answer."""

    @property
    def line(self) -> bytes:
        """The message as a line to the daemon."""
        return self.raw + b"\n" if self.raw is not None else _line(self.message)

    def in_trace(self, traceparent: str) -> ClientMessage:
        """This message, made in the span ``traceparent`` names if it is a ``tools/call`` that
        names none (in its ``_meta.traceparent``)."""
        params = self.message.get("params")
        if self.method != "tools/call" or not isinstance(params, dict):
            return self
        meta = params.get("_meta", {})
        if not isinstance(meta, dict) or "traceparent" in meta:
            return self
        params = {**params, "_meta": {**meta, "traceparent": traceparent}}
        return ClientMessage({**self.message, "params": params}, None)

    def with_caller(self, caller: Mapping[str, object]) -> ClientMessage:
        """This message, with ``caller`` in its ``_meta`` if it is an ``initialize``."""
        params = self.message.get("params")
        if self.method != "initialize" or self.request_id is None:
            return self
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        meta = {**meta, CALLER_META: caller} if isinstance(meta, dict) else {CALLER_META: caller}
        return ClientMessage({**self.message, "params": {**params, "_meta": meta}}, None)

    @property
    def cancelled(self) -> object:
        """The request a ``notifications/cancelled`` names (None for any other message)."""
        if self.method != "notifications/cancelled" or self.request_id is not None:
            return None
        params = self.message.get("params")
        cancelled = params.get("requestId") if isinstance(params, dict) else None
        return cancelled if _is_id(cancelled) else None


def read_client_line(line: bytes) -> list[ClientMessage | Invalid]:
    """The messages of one client line (a JSON-RPC batch is its messages), each checked."""
    if not line.strip():
        return []
    try:
        message = json.loads(line)
    except ValueError as exc:
        return [Invalid(PARSE_ERROR, f"not JSON: {exc}")]
    if not isinstance(message, list):
        return [_checked(message, line)]
    found: list[ClientMessage | Invalid] = []
    if not message:
        found.append(Invalid(INVALID_REQUEST, "an empty batch"))
    found.extend(_checked(item, None) for item in message)
    return found


def _checked(message: object, raw: bytes | None) -> ClientMessage | Invalid:
    if not isinstance(message, dict):
        return Invalid(INVALID_REQUEST, "not a JSON-RPC message: expected an object")
    checked = ClientMessage(message, raw)
    if checked.request_id is not None and not _is_id(checked.request_id):
        return Invalid(INVALID_REQUEST, "a request's id must be a string or a number")
    return checked


# -- the answers the daemon owes, and their deadlines ----------------------------------------------


class Owed:
    """The requests sent to the daemon and not yet answered, each with its deadline."""

    def __init__(self, reply_timeout: float) -> None:
        self.reply_timeout = reply_timeout
        self.requests: dict[object, tuple[float, object, str]] = {}
        """The client's: id -> (deadline, id, method)."""
        self.own: dict[str, float] = {}
        """The relay's own (the replayed initialize): id -> deadline."""

    def expect(self, request_id: object, method: str) -> None:
        """The client's request ``request_id`` has gone to the daemon."""
        self.requests[request_id] = (time.monotonic() + self.reply_timeout, request_id, method)

    def expect_own(self, own_id: str) -> None:
        """The relay's own request ``own_id`` has gone to the daemon."""
        self.own[own_id] = time.monotonic() + self.reply_timeout

    def cancel(self, request_id: object) -> None:
        """The client cancelled its request: an answer to it is not passed on."""
        self.requests.pop(request_id, None)

    def answered(self, request_id: object) -> bool:
        """The daemon answered the client's request; False if it was not owed (late, cancelled)."""
        return self.requests.pop(request_id, None) is not None

    def answered_own(self, request_id: object) -> bool:
        """Whether the daemon's answer to ``request_id`` is to a request of the relay's own."""
        if isinstance(request_id, str) and request_id in self.own:
            del self.own[request_id]
            return True
        return False

    def next_deadline(self) -> float | None:
        """The earliest deadline (None: nothing is owed)."""
        deadlines = [entry[0] for entry in self.requests.values()] + list(self.own.values())
        return min(deadlines) if deadlines else None

    def expire(self, now: float) -> tuple[list[tuple[object, str]], list[str]]:
        """Take out what is owed past its deadline: the client's (id, method), the relay's own ids."""
        late = [
            (request_id, method) for deadline, request_id, method in self.requests.values() if deadline <= now
        ]
        for request_id, _method in late:
            del self.requests[request_id]
        late_own = [own_id for own_id, deadline in self.own.items() if deadline <= now]
        for own_id in late_own:
            del self.own[own_id]
        return late, late_own

    def take_all(self) -> list[tuple[object, str]]:
        """Take out every client request still owed (the daemon will not answer them now)."""
        taken = [(request_id, method) for _deadline, request_id, method in self.requests.values()]
        self.requests.clear()
        return taken


# -- the client's handshake, replayed to a daemon reached after it -------------------------------


class Handshake:
    """The client's ``initialize`` and whether it sent ``notifications/initialized``."""

    def __init__(self, relayed: Relayed) -> None:
        self.relayed = relayed
        self.initialize: dict[str, object] | None = None
        self.initialized = False
        self.replays = 0

    def note(self, message: ClientMessage) -> None:
        """Keep what of ``message`` a replay needs."""
        if message.request_id is not None:
            if message.method == "initialize":
                self.initialize = message.message
        elif message.method == "notifications/initialized":
            self.initialized = True

    def replay(self) -> tuple[str, bytes] | None:
        """The id of a replayed ``initialize`` and the lines that replay the handshake (None if
        the client has sent none)."""
        if self.initialize is None:
            return None
        self.replays += 1
        own_id = f"{self.relayed.program}:replayed-initialize:{self.replays}"
        replayed: dict[str, object] = {"jsonrpc": "2.0", "id": own_id, "method": "initialize"}
        if "params" in self.initialize:
            replayed["params"] = self.initialize["params"]
        lines = _line(replayed)
        if self.initialized:
            lines += _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return own_id, lines


# -- the stand-in for a daemon that is not there -------------------------------------------------


class StandIn:
    """Answers the client's requests while no daemon can be reached (or one refused the relay)."""

    def __init__(self, path: str, outage_file: str | None = None, *, relayed: Relayed) -> None:
        self.path = path
        self.outage_file = outage_file
        self.relayed = relayed
        """Where hive-agent, which supervises the daemon, says it is down (``hive._outage``)."""
        self.answered_initialize = False
        """It answered ``initialize``, advertising ``tools.listChanged``."""
        self.listed_tools = False
        """It answered ``tools/list`` since the daemon was last reached."""

    def answer(self, request_id: object, method: str, params: object, reason: str) -> bytes:
        """The line that answers the request, the daemon being unreachable for ``reason``."""
        relayed = self.relayed
        message = read_outage(self.outage_file) or (
            f"{relayed.program} cannot reach {relayed.what} at {self.path}: {reason}. {relayed.absent_hint}"
        )
        result: dict[str, object]
        if method == "initialize":
            self.answered_initialize = True
            result = {
                "protocolVersion": negotiate(params),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": relayed.server, "version": __version__},
                "instructions": (
                    f"{relayed.summary} {relayed.what[0].upper()}{relayed.what[1:]} was not "
                    f"reachable when this session began ({self.path}: {reason}); each call "
                    "tries again, and says why if it still cannot."
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
                    for name in relayed.tools
                ]
            }
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": message}], "isError": True}
        else:
            return _error_line(request_id, UNAVAILABLE, message)
        return _line({"jsonrpc": "2.0", "id": request_id, "result": result})

    def tools_changed(self) -> bool:
        """The daemon is reached: whether the client holds this stand-in's tool list (once)."""
        if self.answered_initialize and self.listed_tools:
            self.listed_tools = False
            return True
        return False


def _error_line(request_id: object, code: int, message: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


# -- the two ends: the client's stdio and the daemon's socket -------------------------------------


class _Client:
    """The client's end: stdin read into lines, answers written to stdout."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.open = True
        """stdin has not ended."""

    def read(self) -> list[bytes]:
        """The complete lines read (at the end of stdin, the rest as the last line)."""
        try:
            data = os.read(0, READ_SIZE)
        except OSError:
            data = b""
        if data:
            self.buffer += data
            return _lines(self.buffer)
        self.open = False
        rest = bytes(self.buffer)
        self.buffer.clear()
        return [rest] if rest else []

    def write(self, data: bytes) -> None:
        """Write ``data`` whole; ``_ClientGone`` once the client has closed stdout."""
        try:
            _write_all(1, data)
        except BrokenPipeError:
            raise _ClientGone from None


class _DaemonGone(Exception):
    """The connection to the daemon broke (the reason is the message)."""


class _Daemon:
    """The daemon's end: a non-blocking connection, what is still to send, and what is read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock: socket.socket | None = None
        self.outgoing = bytearray()
        self.incoming = bytearray()
        self.shut = False
        """The relay has said it sends no more (its client's stdin ended)."""

    def connect(self) -> None:
        """Try the socket once, without waiting (``OSError`` if there is no daemon to reach)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock
        self.shut = False

    def queue(self, data: bytes) -> None:
        """Add ``data`` to what is to be sent."""
        self.outgoing += data

    def flush(self) -> None:
        """Send what the socket takes now; ``_DaemonGone`` (and nothing left to send) if it broke."""
        while self.outgoing and self.sock is not None:
            try:
                sent = self.sock.send(self.outgoing)
            except BlockingIOError:
                return
            except OSError as exc:
                self.outgoing.clear()
                raise _DaemonGone(exc.strerror or str(exc)) from None
            del self.outgoing[:sent]

    def receive(self) -> list[bytes] | None:
        """The complete lines the daemon wrote (None: nothing to read yet); ``_DaemonGone`` at
        the end of the connection."""
        assert self.sock is not None
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise _DaemonGone(exc.strerror or str(exc)) from None
        if not data:
            raise _DaemonGone("the daemon closed the connection")
        self.incoming += data
        return _lines(self.incoming)

    def shut_down(self) -> None:
        """Tell the daemon the session is over; it still answers what it has read."""
        assert self.sock is not None
        self.shut = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Drop the connection and whatever was still to go either way."""
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.outgoing.clear()
        self.incoming.clear()


class _Log:
    """Lines to stderr, each said once in a row."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.last = ""

    def __call__(self, text: str) -> None:
        if text != self.last:
            self.last = text
            print(f"{self.program}: {text}", file=sys.stderr, flush=True)


# -- the relay: the poll loop, moving lines between the two ends --------------------------------------


class Relay:
    """Moves lines between the client and the daemon; the pieces above decide what each line is
    and what the relay answers when the daemon does not."""

    def __init__(
        self,
        path: str,
        reply_timeout: float,
        traceparent: str | None = None,
        outage_file: str | None = None,
        *,
        relayed: Relayed,
        start: Callable[[], str | None] | None = None,
        caller: Mapping[str, object] | None = None,
    ) -> None:
        self.relayed = relayed
        self.start = start
        """Starts the daemon (for a form that does so on first use); the reason it could not, or None."""
        self.caller = caller
        """What the daemon is to know of the caller (in the relayed initialize's ``_meta``)."""
        self.path = path
        self.reply_timeout = reply_timeout
        self.traceparent = traceparent
        """The span the agent's calls are made in (its turn's), where its environment names one."""
        self.client = _Client()
        self.daemon = _Daemon(path)
        self.owed = Owed(reply_timeout)
        self.handshake = Handshake(relayed)
        self.stand_in = StandIn(path, outage_file, relayed=relayed)
        self.log = _Log(relayed.program)
        self.reason = ""  # why the daemon is not reachable (empty: never tried, or connected)
        self.refused: str | None = None

    def run(self) -> int:
        try:
            while self.client.open or self.owed.requests:
                self._step()
            self._flush()  # best effort: what is left is not a request (a notification, say)
        except _ClientGone:
            pass
        if self.daemon.sock is not None:
            return 0
        return 1 if self.reason or self.refused else 0

    def _step(self) -> None:
        poller = select.poll()
        if self.client.open and len(self.daemon.outgoing) < MAX_BUFFERED:
            poller.register(0, select.POLLIN)
        poller.register(1, 0)  # only its errors: a client that closed stdout has stopped reading
        if self.daemon.sock is not None:
            poller.register(self.daemon.sock, select.POLLIN | (select.POLLOUT if self.daemon.outgoing else 0))
        deadline = self.owed.next_deadline()
        timeout = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
        events = dict(poller.poll(timeout))
        if events.get(1, 0) & select.POLLERR:
            raise _ClientGone
        # The daemon's side first: a connection it has closed is seen before the next request.
        if self.daemon.sock is not None:
            ready = events.get(self.daemon.sock.fileno(), 0)
            if ready & select.POLLOUT:
                self._flush()
            if ready & _POLL_IN and self.daemon.sock is not None:
                self._read_daemon()
        if events.get(0, 0) & _POLL_IN:
            for line in self.client.read():
                self._client_line(line)
        self._expire(time.monotonic())
        daemon = self.daemon
        if not self.client.open and daemon.sock is not None and not daemon.outgoing and not daemon.shut:
            daemon.shut_down()

    def _expire(self, now: float) -> None:
        late, late_own = self.owed.expire(now)
        for request_id, method in late:
            self._error(
                request_id,
                TIMED_OUT,
                f"{self.relayed.what} at {self.path} has not answered this {method} request "
                f"within {in_seconds(self.reply_timeout)}, {self.relayed.timeout_hint}. A late answer is "
                "dropped; later requests are still sent to it.",
            )
        for _own_id in late_own:
            self.log(f"{self.relayed.what} at {self.path} did not answer the replayed initialize")

    # -- the client's side ------------------------------------------------------------------------

    def _client_line(self, line: bytes) -> None:
        for message in read_client_line(line):
            if isinstance(message, Invalid):
                self._error(None, message.code, message.text)
            else:
                self._client_message(message)

    def _client_message(self, message: ClientMessage) -> None:
        if self.traceparent:
            message = message.in_trace(self.traceparent)
        if self.caller is not None:
            message = message.with_caller(self.caller)
        request_id, method = message.request_id, message.method
        self.handshake.note(message)
        if request_id is not None and self.daemon.sock is None:
            self._connect(replay=method != "initialize")
        if message.cancelled is not None:
            self.owed.cancel(message.cancelled)
        if self.daemon.sock is not None:
            if request_id is not None:
                self.owed.expect(request_id, str(method))
            self._send(message.line)
        elif request_id is not None:
            self._answer_alone(request_id, str(method), message.message.get("params"))
        # A notification or a response for a daemon that is not there has no one to go to.

    def _answer_alone(self, request_id: object, method: str, params: object) -> None:
        """Answer a request with no daemon to relay it to."""
        if self.refused is not None:
            self._error(request_id, REFUSED, self.refused)
            return
        self.client.write(self.stand_in.answer(request_id, method, params, self.reason))

    def _error(self, request_id: object, code: int, message: str) -> None:
        self.client.write(_error_line(request_id, code, message))

    # -- the daemon's side ------------------------------------------------------------------------

    def _connect(self, *, replay: bool) -> None:
        """Try the socket once, without waiting; on success, replay the client's handshake."""
        if self.refused is not None:
            return
        try:
            self._connect_or_start()
        except OSError as exc:
            self.reason = _reason(exc, self.relayed)
            self.log(f"cannot reach {self.relayed.what} at {self.path}: {self.reason}")
            return
        except _NotStarted as exc:
            self.reason = str(exc)
            self.log(f"cannot reach {self.relayed.what} at {self.path}: {self.reason}")
            return
        self.reason = ""
        self.log.last = ""
        replayed = self.handshake.replay() if replay else None
        if replayed is not None:
            own_id, lines = replayed
            self.owed.expect_own(own_id)
            self._send(lines)

    def _connect_or_start(self) -> None:
        """Connect; where no daemon serves the socket and this form starts one, start it first."""
        try:
            self.daemon.connect()
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            if self.start is None:
                raise
            why = self.start()
            if why is not None:
                raise _NotStarted(f"{_reason(exc, self.relayed)}, and {why}") from None
            self.daemon.connect()

    def _send(self, data: bytes) -> None:
        self.daemon.queue(data)
        self._flush()

    def _flush(self) -> None:
        try:
            self.daemon.flush()
        except _DaemonGone as gone:
            # The daemon is gone; what it wrote before going (a refusal, say) is still to read.
            while self.daemon.sock is not None and self._read_daemon():
                pass
            if self.daemon.sock is not None:
                self._lost(str(gone))

    def _read_daemon(self) -> bool:
        """Take what the daemon wrote; False if there was nothing to take yet."""
        try:
            lines = self.daemon.receive()
        except _DaemonGone as gone:
            self._lost(str(gone))
            return True
        if lines is None:
            return False
        for line in lines:
            if self.daemon.sock is None:
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
            if self.owed.answered_own(request_id):
                if "error" in message:
                    self.log(f"the daemon refused the replayed initialize: {message['error']}")
                elif self.stand_in.tools_changed():
                    # The client holds our stand-in tool list: have it fetch the daemon's.
                    self.client.write(_line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
                return
            if _is_id(request_id) and not self.owed.answered(request_id):
                self.log(
                    f"dropped the daemon's answer to {request_id!r}: it came too late (or was cancelled)"
                )
                return
        self.client.write(line + b"\n")

    def _lost(self, why: str) -> None:
        self._close()
        self.reason = why
        for request_id, method in self.owed.take_all():
            self._error(
                request_id,
                UNAVAILABLE,
                f"{self.relayed.what} at {self.path} went away before answering this {method} request "
                f"({why}); whether it was carried out is unknown ({self.relayed.lost_hint}). The next "
                "request reconnects.",
            )

    def _refuse(self, reason: str) -> None:
        self._close()
        self.refused = f"{self.relayed.program} cannot use {self.relayed.what} at {self.path}: {reason}"
        self.log(self.refused)
        for request_id, _method in self.owed.take_all():
            self._error(request_id, REFUSED, self.refused)

    def _close(self) -> None:
        self.daemon.close()
        self.owed.own.clear()


def _lines(buffer: bytearray) -> list[bytes]:
    """Take the complete lines out of ``buffer``."""
    end = buffer.rfind(b"\n")
    if end < 0:
        return []
    lines = bytes(buffer[:end]).split(b"\n")
    del buffer[: end + 1]
    return lines


def relay_parser(relayed: Relayed, description: str) -> argparse.ArgumentParser:
    """The command line every form shares (its own flags are added to it)."""
    parser = argparse.ArgumentParser(
        prog=relayed.program, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def relay_main(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, relay: Callable[[argparse.Namespace], Relay]
) -> int:
    """A form's ``main``: the ``relay`` its flags (``argv``, by ``parser``) make, relaying MCP on
    stdio until it ends; the exit status (README, "Exit status")."""
    return run_main(parser.prog, lambda: relay(parser.parse_args(argv)).run(), interrupted=130)
