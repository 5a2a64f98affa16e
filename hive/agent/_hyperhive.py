"""The hyperhive tools, `compact` and `loose_ends`, served to the agent as the kit's MCP server.

The harness serves them (``hive.daemon.serve_mcp``) on the Unix socket ``<state>/hyperhive.sock``
(0600, and only its own uid or root may use it), in its own event loop, so ``on_compact`` is
awaited on the harness's Trio thread. The agent reaches them through ``hive-hyperhive-mcp``, the
stdio relay its runtime spawns (:func:`hive.agent._options.hyperhive_relay_server`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from hive._unix import open_unix_listener
from hive.agent._hyperhive_tools import TOOLS, HyperhiveTools
from hive.daemon import PlainAnswer, ToolServer, serve_mcp

log = logging.getLogger(__name__)

SERVER_NAME = "hyperhive"

INSTRUCTIONS = (
    "The harness's own tools. `loose_ends` lists the background bash tasks whose end you have not been "
    "told yet; `compact` compacts your conversation once this turn ends."
)


def make_mcp_server(tools: HyperhiveTools) -> ToolServer:
    """The MCP server of the tools (their schemas given as is)."""

    async def call_tool(
        name: str, arguments: Any, traceparent: str | None, _client: Mapping[str, Any]
    ) -> PlainAnswer:
        return await tools.call(name, arguments)

    return ToolServer(SERVER_NAME, instructions=INSTRUCTIONS, tools=TOOLS, call_tool=call_tool)


async def serve_hyperhive(
    socket: Path,
    *,
    loose_ends_dir: Path,
    on_compact: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the hyperhive tools on the Unix socket ``socket`` until cancelled (then the socket
    goes); ``task_status.started()`` once it listens.

    ``loose_ends_dir`` is the bash daemon's ``<state>/mcp-loose-ends``; ``on_compact`` is
    awaited (on this Trio thread) each time the agent calls `compact`. Cancelling ends the
    calls in flight: the relay answers each with an error saying the server went away.
    """
    server = make_mcp_server(HyperhiveTools(loose_ends_dir, on_compact))
    async with (
        open_unix_listener(socket, known_as="--state-dir") as listener,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(serve_mcp, listener, server)
        log.debug("serving the hyperhive tools on %s", socket)
        task_status.started()
