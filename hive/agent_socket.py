"""The agent socket's wire: AgentRequest lines and their one-line answers.

One JSON object a line over the agent's Unix socket, answered by one line::

    {"type":"wake","from":"bash-task-ab12","body":"...","transient":true}  ->  {"ok":true}
    {"type":"wake","from":"bash-task-ab12","body":"...","end_id":"ab12:9f3c..."}  ->  {"ok":true}
    {"type":"wake",...,"end_id":"ab12:9f3c...","shown_at":1765100000.5}  (answered inline)  ->  {"ok":true}
    {"type":"prompt","text":"..."}          (an operator's message)         ->  {"ok":true}
    {"type":"compact"}                      (the operator's /compact)       ->  {"ok":true}
    {"type":"status"}                                                       ->  {"ok":true,"status":{...}}
    anything malformed or unknown                                           ->  {"ok":false,"error":"..."}

A line is at most ``MAX_LINE`` (1 MiB, newline not counted): a longer one is refused. The
harness refuses a prompt whose text is empty or only blanks (nothing is queued).

The bash daemon is a client (it sends wakes), and so is the operator's ``hive agent``; the
harness serves the socket. A small server loop lives here too, so the harness, the demo and
the tests share one parser.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import attrs
import trio

from hive._convert import DecodeError, strict_converter, structure
from hive._lines import MAX_LINE, LineCut, LineError, LineReader, LineTooLong, json_line, load_json
from hive._unix import open_unix_listener, peer_uid, uid_allowed
from hive._when import in_seconds
from hive.errors import HiveError

__all__ = [
    "LINGER",
    "MAX_LINE",
    "AgentConnection",
    "AgentReply",
    "AgentRequest",
    "AgentRequestError",
    "AgentState",
    "AgentStatus",
    "Compact",
    "DaemonHealth",
    "LineCut",
    "LineReader",
    "LineTooLong",
    "Prompt",
    "Refused",
    "RequestHandler",
    "Status",
    "Wake",
    "WakeCourier",
    "WakeRefused",
    "answer_then_close",
    "converter",
    "decode_reply",
    "decode_request",
    "encode",
    "end_id",
    "open_agent_connection",
    "send_wake",
    "serve_agent_socket",
]

log = logging.getLogger(__name__)

_KNOWN_AS = "agent socket path"  # what its owner calls the path, in messages


@attrs.frozen
class Wake:
    """Wake the agent: a message from ``sender`` (e.g. ``bash-task-ab12``) for its next turn."""

    sender: str
    body: str
    transient: bool = True
    type: Literal["wake"] = "wake"
    end_id: str | None = None
    """What ended, as ``<task id>:<serial>`` (see :func:`end_id`): the same in every repeat of this
    wake, so a receiver drops a repeat. Optional on the wire, and left out when None: a sender
    that does not know it and a receiver that ignores it both still work."""
    traceparent: str | None = None
    """The W3C ``traceparent`` of what sent it (a bash task's span), where telemetry is
    exported: the turn that carries it links to that span. Optional on the wire, as ``end_id``."""
    shown_at: float | None = None
    """When the end it tells of was answered inline to the agent's own call (Unix time): the
    harness drops it if the turn running then delivered, and carries it if that turn did not
    (the agent died before it read the answer). Optional on the wire, as ``end_id``."""


def end_id(task_id: str, serial: str) -> str:
    """The id of one end of one task: its id and its run's serial (a reused name gets a new serial)."""
    return f"{task_id}:{serial}"


@attrs.frozen
class Prompt:
    """A message for the agent's next turn from ``sender`` (an operator, by default)."""

    text: str
    sender: str = "operator"
    type: Literal["prompt"] = "prompt"


@attrs.frozen
class Compact:
    """The operator's ``/compact``."""

    type: Literal["compact"] = "compact"


@attrs.frozen
class Status:
    """Ask the harness how the agent is doing (answered with an :class:`AgentStatus`)."""

    type: Literal["status"] = "status"


AgentRequest = Wake | Prompt | Compact | Status

AgentState = Literal["idle", "turn", "compacting", "retrying"]
"""What the harness is doing: waiting for something to carry, running a turn, compacting the
session, or waiting to retry a turn that could not start."""


@attrs.frozen
class DaemonHealth:
    """A daemon the harness started and supervises (``--with-bash-daemon``, ``--subagents``)."""

    state: Literal["running", "down"]
    """``running``; or ``down``: it exited (or did not start), and the harness starts it again
    at ``restart_at``."""
    since: float
    """When it entered this state (Unix time)."""
    pid: int | None = None
    """Its pid, while it runs."""
    restarts: int = 0
    """How many times it has been started again since the harness started."""
    last_exit: str | None = None
    """How it last ended (``killed by SIGKILL``, ``exited with status 1``, ``did not start: ...``)."""
    restart_at: float | None = None
    """While down: when the harness starts it again (Unix time)."""


@attrs.frozen
class AgentStatus:
    """The harness's answer to ``status``."""

    state: AgentState
    session_id: str | None = None
    queue: int = 0
    """Messages waiting for a turn (those of a running turn not counted)."""
    carrying: int = 0
    """Messages the running turn carries."""
    turns: int = 0
    """The number of the last turn started, the running one if one runs (compactions included,
    numbered with the turns): the last in the turn log."""
    last_stop_reason: str | None = None
    """How the last turn that ended (``last_turn``) ended: a ``StopReason`` value, or ``failed`` /
    ``not started`` / ``stopped``."""
    last_error: str | None = None
    """The last ended turn's error, if it had one."""
    context_used: int | None = None
    """Tokens in the agent's context window, as the last turn reported them."""
    context_size: int | None = None
    """The size of that window, in tokens."""
    compact_pending: bool = False
    """Whether a compaction waits for the running turn to end."""
    pid: int | None = None
    state_dir: str | None = None
    """The harness's pid and state directory."""
    running_turn: int | None = None
    """The number of the turn running (state ``turn``), or of the compaction (``compacting``)."""
    running_since: float | None = None
    """When it started (Unix time)."""
    last_turn: int | None = None
    """The number of the last turn (or compaction) that ended; after a restart, the turn log's."""
    last_kind: Literal["turn", "compact"] | None = None
    """Whether that was a turn or a compaction."""
    last_started: float | None = None
    """When it started (Unix time)."""
    last_ended: float | None = None
    """When it ended (Unix time)."""
    last_cost_usd: float | None = None
    """What it cost, in USD (the turn log's ``cost_usd``: its session's cost grew by that)."""
    last_tokens: dict[str, Any] = attrs.field(factory=dict)
    """Its token counts as the agent reported them (the turn log's ``tokens``)."""
    session_cost_usd: float | None = None
    """What the session has cost so far, in USD, as its agent last said: its turns' costs add
    up to it."""
    bash_daemon: DaemonHealth | None = None
    """The bash daemon the harness supervises (``--with-bash-daemon``; None: it started none)."""
    subagent_daemon: DaemonHealth | None = None
    """The subagent daemon the harness supervises (``--subagents``)."""


@attrs.frozen
class AgentReply:
    """The answer to a request: ``ok``, else the ``error`` that says why not; ``status`` for ``status``."""

    ok: bool
    error: str | None = None
    status: AgentStatus | None = None


converter = strict_converter()
converter.register_fields(Wake, {"sender": "from"}, omit_if_default=("end_id", "traceparent", "shown_at"))
converter.register_fields(Prompt, {"sender": "from"})
converter.register_fields(AgentReply, omit_if_default=True)

_REQUEST_TYPES: dict[str, type[AgentRequest]] = {
    "wake": Wake,
    "prompt": Prompt,
    "compact": Compact,
    "status": Status,
}


class WakeError(HiveError):
    """Base of the agent socket's errors (its wire, its client and its server)."""


class AgentRequestError(WakeError, ValueError):
    """A line on the agent socket is not a well-formed AgentRequest."""


class WakeRefused(WakeError):
    """The agent socket answered a request with ``ok: false``."""


class Refused(WakeError):
    """Raised by a request handler to answer ``ok: false`` with its message (an expected
    refusal: nothing is logged)."""


def encode(message: AgentRequest | AgentReply) -> bytes:
    """``message`` as its line on the agent socket."""
    return json_line(converter.unstructure(message))


_REQUIRED = {"wake": ("from", "body"), "prompt": ("text",), "compact": (), "status": ()}


def decode_request(line: bytes) -> AgentRequest:
    """Parse one request line; anything malformed raises AgentRequestError saying what is wrong."""
    raw = load_json(line, AgentRequestError)
    if not isinstance(raw, dict):
        raise AgentRequestError("expected a JSON object with a 'type'")
    kind = raw.get("type")
    cls = _REQUEST_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None or not isinstance(kind, str):
        raise AgentRequestError(
            f"unknown request type {kind!r:.60}; expected 'wake', 'prompt', 'compact' or 'status'"
        )
    missing = [field for field in _REQUIRED[kind] if field not in raw]
    if missing:
        raise AgentRequestError(f"malformed {kind} request: missing {', '.join(missing)}")
    try:
        request: AgentRequest = structure(converter, raw, cls, f"{kind} request")
    except DecodeError as exc:
        raise AgentRequestError(str(exc)) from None
    return request


def decode_reply(line: bytes) -> AgentReply:
    """Parse one reply line; anything malformed raises AgentRequestError."""
    raw = load_json(line, AgentRequestError)
    try:
        return structure(converter, raw, AgentReply, f"reply {line[:200]!r}")
    except DecodeError as exc:
        raise AgentRequestError(str(exc)) from None


LINGER = 2.0
"""How long a refused peer's input is read and dropped after the refusal (see :func:`answer_then_close`)."""


async def answer_then_close(stream: trio.abc.Stream, data: bytes, *, linger: float = LINGER) -> None:
    """Write ``data`` (a refusal), then end the connection without losing it.

    Closing with unread input would reset the connection and lose the answer, so the sending
    side is shut and what the peer still sends is read and dropped, for ``linger`` seconds at most.
    """
    with trio.move_on_after(linger), contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)
        if isinstance(stream, trio.abc.HalfCloseableStream):
            await stream.send_eof()
        while await stream.receive_some(65536):
            pass


class AgentConnection:
    """A client connection to an agent socket: one request, one reply, in order."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._reader = LineReader(stream, MAX_LINE)

    async def request(self, message: AgentRequest) -> AgentReply:
        """Send ``message`` and wait for its reply."""
        await self._stream.send_all(encode(message))
        try:
            line = await self._reader.readline()
        except LineError as exc:
            raise AgentRequestError(f"the agent socket's answer is not a line: {exc}") from None
        if line is None:
            raise ConnectionResetError("the agent socket closed before answering")
        return decode_reply(line)

    async def wake(self, wake: Wake) -> None:
        """Send a wake and wait for ``{"ok":true}``; raises WakeRefused on ``ok: false``."""
        reply = await self.request(wake)
        if not reply.ok:
            raise WakeRefused(reply.error or "the agent refused the wake without saying why")

    async def status(self) -> AgentStatus:
        """The harness's status; WakeRefused if it answers ``ok: false`` or without one."""
        reply = await self.request(Status())
        if not reply.ok or reply.status is None:
            raise WakeRefused(reply.error or "the agent socket answered status without one")
        return reply.status


@asynccontextmanager
async def open_agent_connection(path: str | os.PathLike[str]) -> AsyncIterator[AgentConnection]:
    """A connection to the agent socket at ``path`` for the duration of the block."""
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        yield AgentConnection(stream)


async def send_wake(path: str | os.PathLike[str], wake: Wake) -> None:
    """Deliver one wake over a fresh connection and await its acknowledgement."""
    async with open_agent_connection(path) as conn:
        await conn.wake(wake)


RequestHandler = Callable[[AgentRequest], Awaitable[AgentStatus | None]]
"""Takes one request; returns what a ``status`` is answered with (None for the rest)."""


async def serve_agent_socket(
    path: str | os.PathLike[str],
    handler: RequestHandler,
    *,
    task_status: trio.TaskStatus[trio.SocketListener] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve AgentRequests on a Unix socket (0600) until cancelled.

    Each well-formed request is passed to ``handler`` and answered ``{"ok":true}`` once
    the handler returns (with ``"status"`` if it returns an :class:`AgentStatus`); a handler
    that raises, or a malformed line, is answered ``{"ok":false,"error":...}`` and the
    connection stays usable; so does a line over ``MAX_LINE`` (refused, the rest of it dropped up
    to its newline). A peer of another uid (but root) is answered why it is refused,
    and the connection closed.

    The socket is opened as :func:`hive._unix.open_unix_listener` opens it: a live socket at
    ``path`` (another harness's) raises ``SocketInUse`` and is left to it, a stale one is
    replaced, a path that is not a socket raises ``NotASocket``; the socket is removed when
    the server stops.
    """

    own_uid = os.getuid()

    async def serve_connection(stream: trio.SocketStream) -> None:
        async with stream:
            uid = peer_uid(stream.socket)
            if not uid_allowed(uid, own_uid):
                log.warning("refused a connection from uid %d (the harness runs as uid %d)", uid, own_uid)
                reason = (
                    f"refused: peer uid {uid} is neither the harness's uid {own_uid} nor root; "
                    f"send to this agent as uid {own_uid} (or root)"
                )
                await answer_then_close(stream, encode(AgentReply(ok=False, error=reason)))
                return
            reader = LineReader(stream, MAX_LINE)
            while True:
                try:
                    line = await reader.readline()
                except LineTooLong as exc:
                    # Answered like any bad request; the rest of the line is dropped as it comes,
                    # and the request after it is read and answered in its turn.
                    reason = f"this request is a {exc}; send a shorter one"
                    if not await _answer(stream, AgentReply(ok=False, error=reason)):
                        return
                    continue
                except LineCut as exc:
                    await _answer(stream, AgentReply(ok=False, error=str(exc)))
                    return
                except trio.BrokenResourceError:
                    return
                if line is None:
                    return
                if not line.strip():
                    continue
                if not await _answer(stream, await take(line)):
                    return

    async def take(line: bytes) -> AgentReply:
        try:
            request = decode_request(line)
        except AgentRequestError as exc:
            return AgentReply(ok=False, error=str(exc))
        try:
            status = await handler(request)
        except Refused as exc:
            return AgentReply(ok=False, error=str(exc))
        except Exception as exc:
            log.exception("agent request handler failed")
            return AgentReply(ok=False, error=f"the harness failed to take it: {exc}")
        return AgentReply(ok=True, status=status)

    async with open_unix_listener(path, backlog=64, known_as=_KNOWN_AS) as listener:
        task_status.started(listener)
        await trio.serve_listeners(serve_connection, [listener])


async def _answer(stream: trio.SocketStream, reply: AgentReply) -> bool:
    try:
        await stream.send_all(encode(reply))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


# -- the courier: owed wakes to agent sockets -------------------------------------------------------

K = TypeVar("K", bound=Hashable)


class _KeptConnectionFailed(WakeError):
    """A connection kept open since the last wake failed at the next (the agent restarted)."""


_UNREACHABLE = (OSError, trio.BrokenResourceError, trio.TooSlowError, AgentRequestError, WakeRefused)


OnAcked = Callable[[K], Awaitable[None] | None]
"""Told the key of each wake once it is acknowledged (a coroutine function is awaited)."""


@attrs.define(eq=False, kw_only=True)
class WakeCourier(Generic[K]):
    """Sends each owed wake until its agent socket acknowledges it: at least once, and to each
    socket in the order they were owed.

    Each destination socket has a sender of its own (a task of the nursery lent to
    :meth:`start`, with its own backoff while that socket is away), so a socket nobody listens on never holds up the
    wakes to another. Its connection is kept open ``keep_open`` seconds after the last wake,
    for the next: a wake then costs the agent one read, not an accept first (bench 14). A wake
    with no socket (None) is held, never sent, and stays owed.
    ``on_acked(key)`` (given here, or to :meth:`start`) runs once a wake is acknowledged. The
    bash daemon's and the subagent daemon's couriers are this one; each package keys and
    addresses its wakes its own way.
    """

    agent_socket: Path | None = None
    """The socket of the one agent a daemon tells (the bash daemon's; None: it tells none, and
    what it owes stays on disk). A subagent daemon's callers each name their own."""
    on_acked: OnAcked[K] | None = None
    retry_initial: float = 0.05
    """The first pause after a socket is found away; each further one doubles, up to ``retry_max``."""
    retry_max: float = 5.0
    reply_timeout: float = 30.0
    """How long a socket may take to acknowledge one wake (0: no limit)."""
    keep_open: float = 30.0
    """How long a connection is kept open, with nothing owed, for the wakes that follow."""
    delivered: int = 0
    _pending: dict[K, tuple[Path | None, Wake]] = attrs.field(factory=dict)
    _senders: set[Path] = attrs.field(factory=set)
    _more: dict[Path, trio.Event] = attrs.field(factory=dict)
    """Set when a wake is owed to a socket whose sender waits on a kept connection."""
    _nursery: trio.Nursery | None = None
    _acked: OnAcked[K] | None = None

    def send(self, key: K, socket: Path | None, wake: Wake) -> None:
        """Deliver ``wake`` to ``socket`` in the background; ``key`` names it for :meth:`withdraw`."""
        self._pending[key] = (socket, wake)
        if socket is not None and (more := self._more.get(socket)) is not None:
            more.set()  # its sender keeps a connection open: it goes out on it
        self._start_sender(socket)

    def withdraw(self, key: K) -> None:
        """Do not send it after all (the caller has been told the end otherwise)."""
        self._pending.pop(key, None)

    def pending(self) -> list[K]:
        """The keys of the wakes still owed, in the order they were owed."""
        return list(self._pending)

    def start(self, nursery: trio.Nursery, on_acked: OnAcked[K] | None = None) -> None:
        """Send the wakes owed (and those owed later) as tasks of ``nursery``, until it is
        cancelled; ``on_acked`` in place of the one given at construction. Once ``nursery`` has
        closed, a wake owed stays owed, unsent."""
        self._nursery, self._acked = nursery, on_acked or self.on_acked
        for socket, _wake in list(self._pending.values()):
            self._start_sender(socket)

    def _start_sender(self, socket: Path | None) -> None:
        if socket is None or self._nursery is None or socket in self._senders:
            return
        try:
            self._nursery.start_soon(self._sender, socket)
        except RuntimeError:  # the nursery has closed (its owner's last sync owes wakes after it)
            self._nursery = None
            return
        self._senders.add(socket)

    def _next(self, socket: Path) -> tuple[K, tuple[Path | None, Wake]] | None:
        for key, entry in self._pending.items():
            if entry[0] == socket:
                return key, entry
        return None

    async def _sender(self, socket: Path) -> None:
        """Sends the wakes owed to ``socket`` until none is left (and none came while its
        connection was kept open), then ends."""
        delay = self.retry_initial
        try:
            while self._next(socket) is not None:
                try:
                    await self._deliver(socket)
                except _KeptConnectionFailed:
                    continue  # the agent restarted meanwhile: at once, on a new connection
                except _UNREACHABLE as exc:
                    log.info(
                        "agent socket %s unavailable (%s); retrying in %s", socket, exc, in_seconds(delay)
                    )
                    await trio.sleep(delay)
                    delay = min(self.retry_max, delay * 2)
                else:
                    delay = self.retry_initial
        finally:
            self._senders.discard(socket)
            self._more.pop(socket, None)

    async def _deliver(self, socket: Path) -> None:
        """Deliver what is owed to ``socket`` over one connection, then keep it open for
        ``keep_open`` seconds: a wake owed meanwhile reaches an agent already connected, in one
        write, where a new connection would wake the agent for it first (and, on a busy
        machine, hand it the CPU before the wake is written)."""
        async with open_agent_connection(socket) as conn:
            kept = False
            while True:
                while (owed := self._next(socket)) is not None:
                    key, entry = owed
                    try:
                        with trio.fail_after(self.reply_timeout if self.reply_timeout > 0 else math.inf):
                            await conn.wake(entry[1])
                    except _UNREACHABLE as exc:
                        if kept:
                            raise _KeptConnectionFailed from exc
                        raise
                    kept = False
                    # Withdrawn meanwhile (a status call told the agent): nothing left to do.
                    if self._pending.get(key) is entry:
                        del self._pending[key]
                    self.delivered += 1
                    told = None if self._acked is None else self._acked(key)
                    if told is not None:
                        await told
                more = self._more[socket] = trio.Event()
                with trio.move_on_after(self.keep_open):
                    await more.wait()
                if not more.is_set():
                    return
                kept = True
