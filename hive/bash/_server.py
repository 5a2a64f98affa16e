"""The daemon's MCP endpoint: a Unix socket, one `mcp` SDK server session per connection."""

from __future__ import annotations

import logging
import os
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp.server import Server

from hive._mcp import tool_result, tool_server
from hive._unix import peer_uid, uid_allowed
from hive.bash._framing import Receipts, message_streams
from hive.bash._tools import TOOLS, BashTools
from hive.bash.client import OBSERVER
from hive.bash.relay import refusal_line
from hive.wake import answer_then_close

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Background shell execution. `run` starts a command and, if it ends within a few seconds, answers "
    "with its result; otherwise you are woken by a message from bash-task-<id> when it ends. `status` "
    "checks on or waits for a task, `stop` ends one, `list` shows them all."
)


def make_mcp_server(tools: BashTools) -> Server[Any]:
    """The MCP server of the bash tools."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The span the client made the call in (the relay names the agent's turn), where it says.
        traceparent = params.meta.get("traceparent") if params.meta else None
        result = await tools.call(
            params.name, params.arguments, traceparent=traceparent if isinstance(traceparent, str) else None
        )
        if result.delivered is not None:
            # The end it carries is told only if this answer reaches the agent itself, still
            # there. An observer (the CLI, `hive web`) never settles it: the agent is still woken.
            # The connection's receipts come with each request, as the SDK carries a transport's
            # own context (see `message_streams`).
            receipts = ctx.request if isinstance(ctx.request, Receipts) else None
            if receipts is None or ctx.request_id is None or is_observer(ctx.session.client_params):
                result.delivered(False)
            else:
                receipts.expect(ctx.request_id, result.delivered)
        return tool_result(result.text, result.structured, is_error=result.is_error)

    return tool_server("bash", instructions=INSTRUCTIONS, tools=map(attrs.asdict, TOOLS), call_tool=call_tool)


def is_observer(client: types.InitializeRequestParams | None) -> bool:
    """Whether the client said at ``initialize`` that it observes the agent's tasks (:data:`OBSERVER`).
    A client that says nothing, as the agent's own MCP client through the relay, is the agent."""
    experimental = None if client is None else client.capabilities.experimental
    return experimental is not None and OBSERVER in experimental


def refusal(peer: int, own: int) -> str | None:
    """Why a peer of uid ``peer`` may not use the socket of a daemon running as ``own``; None if it may."""
    if uid_allowed(peer, own):
        return None
    return (
        f"refused: peer uid {peer} is neither the daemon's uid {own} nor root; run the MCP client "
        f"as uid {own} (or root), or start a hive-bash-daemon of its own user with another --socket"
    )


async def refuse_connection(stream: trio.SocketStream, reason: str) -> None:
    """Tell a refused peer why, in the one line the relay recognises (:func:`refusal_line`)."""
    await answer_then_close(stream, refusal_line(reason))


async def serve_mcp(
    listener: trio.SocketListener,
    server: Server[Any],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP on every connection until cancelled; a bad connection ends only itself."""
    options = server.create_initialization_options()
    own_uid = os.getuid()

    async def serve_connection(stream: trio.SocketStream) -> None:
        async with stream:
            uid = peer_uid(stream.socket)
            reason = refusal(uid, own_uid)
            if reason is not None:
                log.warning("refused a connection from uid %d (the daemon runs as uid %d)", uid, own_uid)
                await refuse_connection(stream, reason)
                return
            receipts = Receipts()
            try:
                async with message_streams(stream, answer_garbage=True, receipts=receipts) as (read, write):
                    await server.run(read, write, options)
            except Exception:
                log.exception("an MCP connection failed; the daemon goes on serving")

    async with listener:
        task_status.started()
        await trio.serve_listeners(serve_connection, [listener])
