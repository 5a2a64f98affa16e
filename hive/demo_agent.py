"""``hive demo``'s agent: a SCRIPTED ACP agent, with no model behind it, for showing the harness's loop.

It speaks ACP through the official SDK (``acp``) on stdin and stdout, and uses the MCP servers
the harness gives it in ``session/new`` with the `mcp` SDK's clients: the ``bash`` relay (stdio)
and the ``hyperhive`` tools (stdio too: ``hive-hyperhive-mcp``, the relay to hive-agent's own
server).
What it does is fixed, not decided:

- a prompt that is not a wake: it starts a background task with ``bash`` ``run``
  (``wait_seconds=0``, so the task's end comes as a wake), then asks ``hyperhive``
  ``loose_ends``, which lists the task as still running. The task waits on a FIFO that the
  agent writes to only after that answer, so the order is the same on any machine;
- a prompt carrying a wake (``bash-task-...``): it says what woke it and asks ``loose_ends``
  again, which no longer lists the task, since the wake that told its end was acknowledged.

Each tool call is reported as an ACP tool call named ``mcp__<server>__<tool>`` (in ``_meta``),
so the turn log shows it as it would show a real agent's. Run as ``python -m hive.demo_agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import acp
import mcp_types
from acp import schema
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hive import __version__
from hive._main import run_main
from hive._when import counted

log = logging.getLogger("hive.demo_agent")

TASK_NAME = "demo"
GATE = "demo-gate"
LABEL = "[scripted demo agent: no model, every step below is fixed]"
WAKE_MARK = "bash-task-"


class DemoAgent:
    """The scripted agent: one instance per process, sessions kept in memory."""

    def __init__(self) -> None:
        self._conn: acp.Client | None = None
        self._servers: dict[str, dict[str, Any]] = {}
        self._cwd: dict[str, str] = {}
        self.gate_fd: int | None = None

    def on_connect(self, conn: acp.Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(load_session=False),
            agent_info=schema.Implementation(
                name="hive-demo-agent", title="hive demo agent (scripted, no model)", version=__version__
            ),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> schema.NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._servers[session_id] = {server.name: server for server in mcp_servers or []}
        self._cwd[session_id] = cwd
        return schema.NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **_: Any) -> None:
        log.info("cancel for session %s (a scripted turn is short: it ends on its own)", session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> schema.PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        servers = self._servers.get(session_id)
        if servers is None:
            raise acp.RequestError.invalid_params({"sessionId": f"no session {session_id}"})
        turn = _Turn(self, session_id, servers, self._cwd[session_id])
        if WAKE_MARK in text:
            await turn.woken(text)
        else:
            await turn.first()
        return schema.PromptResponse(stop_reason="end_turn")

    async def send(self, session_id: str, update: Any) -> None:
        assert self._conn is not None
        await self._conn.session_update(session_id=session_id, update=update)


class _Turn:
    def __init__(self, agent: DemoAgent, session_id: str, servers: dict[str, Any], cwd: str) -> None:
        self.agent = agent
        self.session_id = session_id
        self.servers = servers
        self.gate = os.path.join(cwd, GATE)

    async def say(self, text: str) -> None:
        await self.agent.send(self.session_id, acp.update_agent_message_text(text))

    async def first(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.gate)
        os.mkfifo(self.gate, 0o600)
        gate = shlex.quote(self.gate)
        command = (
            f'read -r word < {gate}; echo "hello from a background task, released with: $word"; uname -s'
        )
        await self.say(
            f"{LABEL}\nStarting a background task through the bash relay. It waits on {GATE}, a FIFO I "
            "write to once I have checked my loose ends, so this demo runs in the same order anywhere."
        )
        await self.call("bash", "run", {"cmd": command, "name": TASK_NAME, "wait_seconds": 0})
        listed = await self.call("hyperhive", "loose_ends", {})
        self.release_task()
        await self.say(
            f"loose_ends listed {_tasks(listed)} whose end I have not been told. I released the task and "
            f"end this turn; the harness will wake me with a message from {WAKE_MARK}{TASK_NAME} when it ends."
        )

    def release_task(self) -> None:
        # Opened for reading and writing, a FIFO opens at once and keeps what is written until
        # the task opens it and reads: the word is not lost if the task is not there yet.
        fd = os.open(self.gate, os.O_RDWR | os.O_NONBLOCK)
        os.write(fd, b"go\n")
        if self.agent.gate_fd is not None:
            os.close(self.agent.gate_fd)
        self.agent.gate_fd = fd

    async def woken(self, prompt: str) -> None:
        lines = [line for line in prompt.splitlines() if line.strip()]
        about = next((line for line in lines if "ended:" in line), lines[0] if lines else "")
        said = [f"{LABEL}", f"I was woken by a wake: {about.strip()}"]
        if "last stdout lines:" in lines:
            output = lines[lines.index("last stdout lines:") + 1 :]
            said.append(
                "Its output: " + " / ".join(line for line in output if not line.startswith("status("))
            )
        await self.say("\n".join(said))
        listed = await self.call("hyperhive", "loose_ends", {})
        await self.say(
            f"loose_ends now lists {_tasks(listed)}: the wake told me the end, so nothing is left open."
        )
        if self.agent.gate_fd is not None:
            os.close(self.agent.gate_fd)
            self.agent.gate_fd = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.gate)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool`` of MCP server ``server``, reported as an ACP tool call; its structured content."""
        name = f"mcp__{server}__{tool}"
        call_id = f"call-{uuid.uuid4().hex[:12]}"
        start = acp.start_tool_call(
            call_id, name, kind="execute", status="in_progress", raw_input=arguments
        ).model_copy(update={"field_meta": {"toolName": name}})
        await self.agent.send(self.session_id, start)
        try:
            async with _mcp_session(self.servers[server]) as session:
                result = await session.call_tool(tool, arguments)
        except Exception as exc:
            log.exception("the call to %s failed", name)
            await self._ended(call_id, name, f"{type(exc).__name__}: {exc}", None, failed=True)
            return None
        text = "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))
        await self._ended(call_id, name, text, result.structured_content, failed=bool(result.is_error))
        return result.structured_content

    async def _ended(self, call_id: str, name: str, text: str, raw: Any, *, failed: bool) -> None:
        update = acp.update_tool_call(
            call_id,
            status="failed" if failed else "completed",
            content=[acp.tool_content(acp.text_block(text))],
            raw_output=raw,
        ).model_copy(update={"field_meta": {"toolName": name}})
        await self.agent.send(self.session_id, update)


def _tasks(listed: Any) -> str:
    """How many tasks a ``loose_ends`` answer lists, for the demo's reader."""
    total = listed.get("total") if isinstance(listed, dict) else None
    return counted(total, "task") if isinstance(total, int) else "an unknown number of tasks"


@contextlib.asynccontextmanager
async def _mcp_session(server: Any) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``server`` (an ACP stdio MCP server entry: hive gives none other)."""
    params = StdioServerParameters(
        command=server.command,
        args=list(server.args),
        env={**os.environ, **{v.name: v.value for v in server.env}},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def main() -> int:
    """``python -m hive.demo_agent``: serve ACP on stdio until it ends (SIGINT: exit 0 too)."""
    return run_main("hive demo agent", _serve, interrupted=0)


def _serve() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="hive demo agent: %(message)s")
    # It implements only what the demo uses; the SDK answers anything else with -32601.
    agent = cast("acp.Agent", DemoAgent())
    asyncio.run(acp.run_agent(agent))


if __name__ == "__main__":
    sys.exit(main())
