"""Speaking to a hyperhive server as the agent does: the SDK's stdio client spawning the real relay
(hive-hyperhive-mcp) to the server's socket."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp.client.session import ClientSession

from tests.helpers.mcp_stdio import argv_params, stdio_session


def hyperhive_relay_argv(socket_path: Path) -> list[str]:
    """The command line of the real relay (``hive-hyperhive-mcp``) to ``socket_path``."""
    return [sys.executable, "-m", "hive.agent.hyperhive_mcp", "--socket", str(socket_path)]


@asynccontextmanager
async def session(socket_path: Path) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the hyperhive server on ``socket_path``, through the relay
    (its stderr beside the socket, in ``hyperhive-relay.err``)."""
    params = argv_params(hyperhive_relay_argv(socket_path))
    async with stdio_session(params, socket_path.parent / "hyperhive-relay.err") as s:
        yield s
