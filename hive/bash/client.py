"""A client for the bash daemon's MCP socket, for the operator CLI and for programs."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import trio
from mcp.client.session import ClientSession

from hive import __version__
from hive.bash._errors import DaemonUnavailable
from hive.bash._framing import message_streams
from hive.bash._tools import ToolResult


class BashClient:
    """Calls the daemon's tools; each call answers a :class:`ToolResult` (``is_error`` for a tool error)."""

    def __init__(self, session: ClientSession) -> None:
        self._session = session

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        result = await self._session.call_tool(tool, arguments or {})
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        return ToolResult(text, dict(result.structured_content or {}), bool(result.is_error))

    async def run(
        self,
        cmd: str,
        *,
        name: str | None = None,
        timeout_secs: float | None = None,
        wait_seconds: float = 3.0,
    ) -> ToolResult:
        args: dict[str, Any] = {"cmd": cmd, "wait_seconds": wait_seconds}
        if name is not None:
            args["name"] = name
        if timeout_secs is not None:
            args["timeout_secs"] = timeout_secs
        return await self.call("run", args)

    async def status(self, task_id: str, *, wait_seconds: float = 0.0) -> ToolResult:
        return await self.call("status", {"id": task_id, "wait_seconds": wait_seconds})

    async def stop(self, task_id: str) -> ToolResult:
        return await self.call("stop", {"id": task_id})

    async def list(self) -> ToolResult:
        return await self.call("list")


@asynccontextmanager
async def open_bash_client(socket_path: str | os.PathLike[str]) -> AsyncIterator[BashClient]:
    """Connect to the daemon at ``socket_path`` and open an MCP session on it."""
    path = Path(socket_path)
    try:
        stream = await trio.open_unix_socket(os.fspath(path))
    except OSError as exc:
        raise DaemonUnavailable(
            f"cannot reach hive-bash-daemon at {path}: {exc.strerror or exc}; start it with "
            "`hive-bash-daemon`, or point HIVE_BASH_SOCKET (or --socket) at its socket"
        ) from None
    info = types.Implementation(name="hive", version=__version__)
    async with (
        stream,
        message_streams(stream, answer_garbage=False) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield BashClient(session)
