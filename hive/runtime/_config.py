"""What a runtime is configured with: the same for every backend."""

from __future__ import annotations

import enum
from pathlib import Path

import attrs

from hive.errors import BadInput
from hive.sink import ContextUsage

STOP_GRACE = 10.0
"""After SIGINT, how long to wait for the agent's own end of the turn (``--stop-grace``'s default)."""
SINK_GRACE = 2.0
"""How long a stop cut short by an outer cancel may still spend writing the turn's result."""


@attrs.frozen
class StdioServer:
    """An MCP server the agent spawns (e.g. the bash relay)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    allow_all_tools: bool = True
    """Whether every tool of this server is allowed without asking (claude: ``mcp__<name>``)."""


@attrs.frozen
class HttpServer:
    """An MCP server the agent reaches over HTTP (e.g. the hyperhive tools)."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    allow_all_tools: bool = True


McpServer = StdioServer | HttpServer


@attrs.frozen
class CompactionPolicy:
    """When to compact a session and what to save first.

    After a turn whose context usage passes ``watermark`` (a fraction of the context
    window), the runtime runs ``checkpoint_prompt`` as a turn of its own (the agent writes
    down what it must not forget), then compacts. ``watermark`` None: never on its own.
    """

    watermark: float | None = 0.8
    checkpoint_prompt: str = (
        "The conversation is about to be compacted. Before that, write down briefly what you are "
        "working on, what is done, what is left, and anything you must not forget."
    )

    def __attrs_post_init__(self) -> None:
        if self.watermark is not None and not 0 < self.watermark <= 1:
            raise BadInput(
                f"watermark must be a fraction of the context window in (0, 1], not {self.watermark}"
            )

    def due(self, usage: ContextUsage | None) -> bool:
        """Whether a session whose context is at ``usage`` is to be compacted now."""
        return (
            self.watermark is not None
            and usage is not None
            and usage.fraction is not None
            and usage.fraction >= self.watermark
        )


class Permission(enum.Enum):
    """What happens to a tool call the agent would ask a person about (nobody is there to ask).

    Tools of an MCP server with ``allow_all_tools`` and the names in ``Config.allowed_tools``
    are allowed under every policy, on both backends.
    """

    DEFAULT = "default"
    """The agent's own permission settings decide; what it asks about is refused.
    claude: no ``--permission-mode`` (``--print`` refuses what needs asking);
    ACP: ``session/request_permission`` is answered with the agent's reject option."""
    ACCEPT_EDITS = "accept_edits"
    """File edits are allowed, anything else asked about is refused.
    claude: ``--permission-mode acceptEdits``; ACP: requests for a tool call of kind
    read, edit, delete, move or search are allowed, others rejected."""
    ALLOW = "allow"
    """Every tool call is allowed.
    claude: ``--permission-mode bypassPermissions`` (which claude refuses to run as root
    unless its environment has ``IS_SANDBOX=1``); ACP: every request is allowed."""


@attrs.frozen
class Config:
    """How to run an agent's turns."""

    cwd: Path = attrs.field(factory=Path.cwd)
    model: str | None = None
    effort: str | None = None
    system_prompt: str | None = None
    idle_timeout: float | None = None
    """Stop a turn the agent has sent nothing for this many seconds (None: never)."""
    stop_grace: float = STOP_GRACE
    """After SIGINT, how long to wait for the agent's own end of the turn before reporting one."""
    cancel_grace: float = 10.0
    """ACP: after ``session/cancel``, how long the agent has to answer the prompt before SIGINT."""
    linger: float = 5.0
    """claude: how long a claude may stay after printing its result before it is sent SIGINT."""
    close_grace: float = 2.0
    """Closing the runtime: how long to wait for the agents it sent SIGINT to."""
    compact_idle: float = 180.0
    """ACP: a ``compact`` command that sends nothing for this long (or the turn's idle window,
    if shorter) has failed, and the session is archived instead."""
    mcp_servers: tuple[McpServer, ...] = ()
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    compaction: CompactionPolicy = attrs.field(factory=CompactionPolicy)
    permission: Permission = attrs.field(default=Permission.DEFAULT, converter=Permission)
    """What happens to a tool call the agent would ask about (see ``Permission``)."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables added to the agent's environment (over the harness's own)."""
    state_dir: Path | None = None
    """A private directory (0700) where the runtime may keep files of its own: claude's
    ``--mcp-config`` file (0600; it holds the MCP servers' headers, tokens included, which on
    claude's command line any local user could read). None: a private temporary directory,
    made when first needed and removed when the process exits."""
