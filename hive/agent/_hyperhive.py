"""The hyperhive tools, `compact` and `loose_ends`, served to the agent over streamable HTTP MCP.

The server listens on 127.0.0.1, on a port the kernel picks, and answers only requests that
carry its bearer token: any other gets 401 before it reaches MCP. The agent is given the URL and
the token as an HTTP MCP server (:func:`hyperhive_server`). hypercorn serves it on its Trio
worker in the harness's own event loop, so ``on_compact`` is awaited on the harness's Trio thread.

The `mcp` SDK and hypercorn take over a second and some 40 MB to import, so they are imported
only when the server starts (in a worker thread, so the harness's event loop goes on meanwhile):
`hive run` and the operator CLI never pay for them.
"""

from __future__ import annotations

import hmac
import importlib
import logging
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import trio

from hive._when import in_seconds
from hive.agent._hyperhive_tools import TOOLS, HyperhiveTools
from hive.runtime import HttpServer

if TYPE_CHECKING:
    import mcp_types
    from hypercorn.config import Config
    from hypercorn.typing import ASGIFramework
    from mcp.server import Server

log = logging.getLogger(__name__)

SERVER_NAME = "hyperhive"
SHUTDOWN_GRACE = 2.0
"""Once told to stop, how long requests in flight have to finish before they are cancelled."""
PATH = "/mcp"

INSTRUCTIONS = (
    "The harness's own tools. `loose_ends` lists the background bash tasks whose end you have not been "
    "told yet; `compact` compacts your conversation once this turn ends."
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@attrs.frozen
class Hyperhive:
    """Where the agent reaches the hyperhive tools, and the bearer token they require."""

    url: str
    token: str = attrs.field(repr=False)


def hyperhive_server(h: Hyperhive) -> HttpServer:
    """The hyperhive tools as an MCP server for the runtime's config, every tool allowed."""
    return HttpServer(
        name=SERVER_NAME,
        url=h.url,
        headers=(("Authorization", f"Bearer {h.token}"),),
        allow_all_tools=True,
    )


def make_mcp_server(tools: HyperhiveTools) -> Server[Any]:
    """The MCP server of the tools (:func:`hive._mcp.tool_server`: the tools' schemas are given as is)."""
    from hive._mcp import tool_result, tool_server

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        result = await tools.call(params.name, params.arguments)
        return tool_result(result.text, result.structured, is_error=result.is_error)

    return tool_server(SERVER_NAME, instructions=INSTRUCTIONS, tools=TOOLS, call_tool=call_tool)


# -- HTTP ----------------------------------------------------------------------------------------


@attrs.frozen
class BearerGuard:
    """An ASGI wrapper that lets through only requests carrying ``Authorization: Bearer <token>``."""

    app: AsgiApp
    token: str = attrs.field(repr=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._authorized(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="hyperhive"'),
                    ],
                }
            )
            body = b'{"error":"unauthorized: send the Authorization header the harness gave you"}'
            await send({"type": "http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})

    def _authorized(self, scope: Scope) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        expected = f"Bearer {self.token}".encode()
        return len(given) == 1 and hmac.compare_digest(given[0], expected)


def _import_http_stack() -> None:
    for name in ("hive._mcp", "hypercorn.config", "hypercorn.trio"):
        importlib.import_module(name)


async def serve_hyperhive(
    *,
    loose_ends_dir: Path,
    on_compact: Callable[[], Awaitable[None]],
    shutdown_grace: float = SHUTDOWN_GRACE,
    task_status: trio.TaskStatus[Hyperhive] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the hyperhive tools until cancelled; ``task_status.started()`` gets where they are.

    ``loose_ends_dir`` is the bash daemon's ``<state>/mcp-loose-ends``; ``on_compact`` is
    awaited (on this Trio thread) each time the agent calls `compact`. Cancelling stops the
    server gracefully: it stops listening at once, and requests in flight have
    ``shutdown_grace`` seconds (:data:`SHUTDOWN_GRACE` unless given) to finish before they are
    cancelled.
    """
    log.debug("starting the hyperhive tools' HTTP server")
    # A stop while the imports run (a second, or ten on a loaded machine) does not wait for them:
    # the worker thread is left to finish on its own (a daemon thread: it holds no exit).
    await trio.to_thread.run_sync(_import_http_stack, abandon_on_cancel=True)
    import hypercorn.config

    token = secrets.token_urlsafe(32)
    server = make_mcp_server(HyperhiveTools(loose_ends_dir, on_compact))
    app = BearerGuard(
        server.streamable_http_app(streamable_http_path=PATH, stateless_http=True, json_response=True), token
    )
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = shutdown_grace
    config.accesslog = None
    config.errorlog = logging.getLogger(f"{__name__}.http")
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(partial(_serve_until_stopped, app, config, stop))
            task_status.started(Hyperhive(url=f"{binds[0]}{PATH}", token=token))
            await trio.sleep_forever()
        finally:
            stop.set()


async def _serve_until_stopped(
    app: AsgiApp, config: Config, stop: trio.Event, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    """hypercorn: cancelled at once while it starts (nobody has its address yet, so no request is
    in flight); once it serves, shielded from its caller's cancellation: it stops when ``stop`` is
    set, and is cancelled if it has not stopped ``config.graceful_timeout`` seconds later."""
    import hypercorn.trio

    serve = partial(
        hypercorn.trio.serve, cast("ASGIFramework", app), config, shutdown_trigger=stop.wait, mode="asgi"
    )
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(serve)
            # A cancel that came as it bound is taken now: shielded, and with its caller's start
            # cancelled (so `started` reaches nobody), it would wait for a `stop` never set.
            await trio.lowlevel.checkpoint_if_cancelled()
            scope.shield = True
            task_status.started(binds)
            await stop.wait()
            scope.deadline = trio.current_time() + config.graceful_timeout
    if scope.cancelled_caught:
        log.warning(
            "the hyperhive HTTP server did not stop within %s of being told to; its requests were cancelled",
            in_seconds(config.graceful_timeout),
        )
