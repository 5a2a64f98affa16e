"""An MCP client session with a server spawned by the SDK's stdio client, as an agent's client does."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def argv_params(argv: Sequence[str]) -> StdioServerParameters:
    """The server ``argv`` runs, in this process's environment."""
    return StdioServerParameters(command=argv[0], args=list(argv[1:]), env=dict(os.environ))


@asynccontextmanager
async def stdio_session(params: StdioServerParameters, errlog_path: Path) -> AsyncIterator[ClientSession]:
    """An initialized session with the server ``params`` spawns (its stderr appended to
    ``errlog_path``)."""
    with open(errlog_path, "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
