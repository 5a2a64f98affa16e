"""The kit's MCP endpoint: a Unix socket, one session per connection, its peers uid-checked."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket

import trio

from hive._unix import peer_uid, uid_allowed
from hive.agent_socket import answer_then_close
from hive.daemon._receipts import Receipts, peer_has_closed
from hive.daemon._session import Session
from hive.daemon._tools import ToolServer
from hive.daemon.protocol import refusal_line

log = logging.getLogger(__name__)


def refusal(peer: int, own: int, hint: str) -> str | None:
    """Why a peer of uid ``peer`` may not use the socket of a server running as ``own``; None if
    it may. ``hint`` says what to do instead (``{own}`` in it: the server's uid)."""
    if uid_allowed(peer, own):
        return None
    return f"refused: peer uid {peer} is neither the daemon's uid {own} nor root; {hint.format(own=own)}"


async def refuse_connection(stream: trio.SocketStream, reason: str) -> None:
    """Tell a refused peer why, in the one line the relay recognises (:func:`refusal_line`)."""
    await answer_then_close(stream, refusal_line(reason))


async def serve_connection(stream: trio.SocketStream, server: ToolServer) -> None:
    """Serve one MCP session on ``stream`` (already uid-checked)."""
    receipts = Receipts()
    with contextlib.ExitStack() as closing:
        # A second handle on the connection, for peeking without trio's socket wrapper.
        peek = closing.enter_context(socket.socket(fileno=os.dup(stream.socket.fileno())))
        receipts.probe = functools.partial(peer_has_closed, peek)
        try:
            await Session(stream, server, receipts).run()
        finally:
            receipts.close()


async def serve_mcp(
    listener: trio.SocketListener,
    server: ToolServer,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP on every connection until cancelled; a bad connection ends only itself."""
    own_uid = os.getuid()

    async def serve_one(stream: trio.SocketStream) -> None:
        async with stream:
            uid = peer_uid(stream.socket)
            reason = refusal(uid, own_uid, server.refusal_hint)
            if reason is not None:
                log.warning("refused a connection from uid %d (the daemon runs as uid %d)", uid, own_uid)
                await refuse_connection(stream, reason)
                return
            try:
                await serve_connection(stream, server)
            except Exception:
                log.exception("an MCP connection failed; the daemon goes on serving")

    async with listener:
        task_status.started()
        await trio.serve_listeners(serve_one, [listener])
