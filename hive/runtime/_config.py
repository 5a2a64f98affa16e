"""What a runtime is configured with: the same for every backend."""

from __future__ import annotations

from pathlib import Path

import attrs


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
            raise ValueError(
                f"watermark must be a fraction of the context window in (0, 1], not {self.watermark}"
            )


@attrs.frozen
class Config:
    """How to run an agent's turns."""

    cwd: Path = attrs.field(factory=Path.cwd)
    model: str | None = None
    effort: str | None = None
    system_prompt: str | None = None
    idle_timeout: float | None = None
    """Stop a turn the agent has sent nothing for this many seconds (None: never)."""
    stop_grace: float = 10.0
    """After SIGINT, how long to wait for the agent's own end of the turn before reporting one."""
    mcp_servers: tuple[McpServer, ...] = ()
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    compaction: CompactionPolicy = attrs.field(factory=CompactionPolicy)
    permission: str = "allow_once"
    """How an agent's permission request is answered (ACP): the option of this kind
    (``allow_once``, ``allow_always``, ``reject_once``, ``reject_always``), else another allow."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables added to the agent's environment (over the harness's own)."""
