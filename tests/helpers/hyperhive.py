"""Speaking to a hyperhive server: an MCP session through the SDK's streamable HTTP client, and
raw JSON-RPC posts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hive.agent._hyperhive import Hyperhive


@asynccontextmanager
async def session(h: Hyperhive, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """An MCP session with the server through the SDK's streamable HTTP client, with the token."""
    auth = {"Authorization": f"Bearer {h.token}"} if headers is None else headers
    async with (
        httpx2.AsyncClient(headers=auth) as client,
        streamable_http_client(h.url, http_client=client) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


def tool_call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}


async def raw_post(h: Hyperhive, headers: dict[str, str], message: dict[str, Any]) -> httpx2.Response:
    """One JSON-RPC message POSTed as is (the server is stateless: no initialize is needed)."""
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient() as client:
        return await client.post(h.url, headers={**base, **headers}, content=json.dumps(message))
