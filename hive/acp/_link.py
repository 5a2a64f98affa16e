"""The agent link: one ACP agent process, its JSON-RPC connection, and what it said at initialize.

A link owns the process (leading its own process group), the task that reads it, and its
stderr tail. It is started and initialized by ``open_link``, refused there when the agent
cannot serve as hive's runtime, and dropped by ``drop``: SIGINT to its group, a bounded wait
for it to go, and no more reading from it. Nothing is ever sent but SIGINT.
"""

from __future__ import annotations

import logging

import attrs
import trio

from hive import __version__
from hive.acp._command import agent_command
from hive.acp._errors import AcpError, AgentExited
from hive.acp._jsonrpc import Connection, NotificationHandler, RequestHandler
from hive.acp._schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    SchemaError,
    from_wire,
    to_wire,
)
from hive.runtime import (
    AgentGroup,
    AgentProcess,
    AgentRefused,
    Config,
    HttpServer,
    Progress,
    RuntimeSpec,
    StderrTail,
    start_agent,
)

log = logging.getLogger(__name__)

EXIT_WAIT = 1.0
"""When the agent's output ends, how long to wait for its exit status."""


@attrs.define(eq=False)
class AgentLink:
    """One agent process and the connection to it."""

    process: AgentProcess
    connection: Connection
    stderr: StderrTail
    scope: trio.CancelScope
    """The scope of the task that reads the agent; cancelled when the link is dropped."""
    capabilities: AgentCapabilities = attrs.field(factory=AgentCapabilities)
    info: Implementation | None = None
    session: str | None = None
    """The session attached on this process (a new process attaches it again)."""

    @property
    def usable(self) -> bool:
        return not self.connection.closed and not self.process.signalled

    @property
    def name(self) -> str:
        return self.info.name if self.info else self.process.argv[0]

    def interrupt(self) -> None:
        """SIGINT to the agent's group (once), and no more reading from it."""
        self.process.interrupt()
        self.scope.cancel()

    async def drop(self, grace: float) -> None:
        """SIGINT to the agent's group, at most ``grace`` for it to go, and no more reading from it."""
        self.process.interrupt()
        with trio.move_on_after(grace, shield=True):
            await self.process.wait()
        self.scope.cancel()


async def open_link(
    spec: RuntimeSpec,
    config: Config,
    nursery: trio.Nursery,
    agents: AgentGroup,
    progress: Progress,
    *,
    on_request: RequestHandler,
    on_notification: NotificationHandler,
) -> AgentLink:
    """Spawn the agent from ``spec`` and initialize it, its reader running in ``nursery``.

    AgentRefused if it cannot serve as hive's runtime (it is sent SIGINT then). A cancel while
    it starts leaves it registered in ``agents``, whose closing sends it SIGINT; the caller's
    stop path does the same at once.
    """
    command = agent_command(spec, config)
    argv = command.argv
    with progress.waiting(f"the ACP agent {argv[0]!r} to start"):
        process = await start_agent(argv, cwd=config.cwd, env=command.env, stdin_pipe=command.stdin_pipe)
    agents.add(process)
    assert process.stdin is not None and process.stdout is not None
    stderr = StderrTail()

    async def ended() -> BaseException:
        with trio.move_on_after(EXIT_WAIT):
            await process.wait()
        return AgentExited(process.returncode, stderr.text())

    connection = Connection(process.stdin, process.stdout, on_request, on_notification, ended)
    link = AgentLink(process, connection, stderr, trio.CancelScope())
    try:
        await nursery.start(_serve, link)
        with progress.waiting(f"the ACP agent {argv[0]!r} to answer initialize"):
            refusal = await _initialize(link, _http_servers(config))
    except BaseException:
        # Stopped while it starts (or failing to): SIGINT, and its end for the stop grace.
        with trio.move_on_after(config.stop_grace, shield=True):
            await link.drop(config.stop_grace)
        raise
    if refusal is not None:
        await link.drop(config.stop_grace)
        raise AgentRefused(refusal)
    return link


async def _serve(link: AgentLink, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Read the agent's output and its stderr until both end, or until the link is dropped."""
    stderr = link.process.stderr
    assert stderr is not None
    with link.scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.stderr.drain, stderr)
            await nursery.start(link.connection.serve)
            task_status.started()


def _http_servers(config: Config) -> tuple[str, ...]:
    """The names of the MCP servers in ``config`` that the agent is to reach over HTTP."""
    return tuple(server.name for server in config.mcp_servers if isinstance(server, HttpServer))


async def _initialize(link: AgentLink, http_servers: tuple[str, ...]) -> str | None:
    """Initialize the agent; why it cannot serve as hive's runtime with the MCP servers
    ``http_servers`` over HTTP, or None if it can."""
    command = link.process.argv[0]
    try:
        answer = await link.connection.request(
            "initialize",
            to_wire(
                InitializeRequest(PROTOCOL_VERSION, ClientCapabilities(), Implementation("hive", __version__))
            ),
        )
        initialized: InitializeResponse = from_wire(answer, InitializeResponse)
    except (AcpError, SchemaError) as exc:
        return f"the ACP agent {command!r} failed to initialize: {exc}"
    link.capabilities, link.info = initialized.agent_capabilities, initialized.agent_info
    if initialized.protocol_version != PROTOCOL_VERSION:
        return (
            f"the ACP agent {link.name!r} speaks protocol version {initialized.protocol_version}; "
            f"hive speaks {PROTOCOL_VERSION}"
        )
    if http_servers and not initialized.agent_capabilities.mcp_capabilities.http:
        return (
            f"the ACP agent {link.name!r} does not take MCP servers over HTTP (its initialize answer lacks "
            f"mcpCapabilities.http), and the MCP config names {', '.join(http_servers)} over HTTP: serve "
            'them as stdio servers ("command"), or leave them out'
        )
    return None
