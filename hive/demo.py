"""``hive demo``: the bash service end to end on built-in defaults, in a temporary directory."""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, BinaryIO

import mcp_types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hive.bash._launch import running_daemon
from hive.wake import AgentRequest, Wake, serve_agent_socket


def relay_command() -> tuple[str, list[str]]:
    """How to start ``hive-bash-mcp``: the installed script beside this interpreter, else ``-m``."""
    script = Path(sys.executable).with_name("hive-bash-mcp")
    if script.exists():
        return str(script), []
    return sys.executable, ["-m", "hive.bash.relay"]


def _say(text: str = "") -> None:
    print(text, flush=True)


def _show(result: types.CallToolResult) -> None:
    for block in result.content:
        if isinstance(block, types.TextContent):
            _say(textwrap.indent(block.text, "    | "))


async def _demo(workdir: Path, daemon_log: BinaryIO) -> None:
    state = workdir / "state"
    bash_socket = workdir / "bash.sock"
    agent_socket = workdir / "agent.sock"
    wakes, woken = trio.open_memory_channel[Wake](16)

    async def take(request: AgentRequest) -> None:
        if isinstance(request, Wake):
            await wakes.send(request)

    async with trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, agent_socket, take)
        _say(f"demo agent socket listening on {agent_socket}")
        daemon_args = [
            "--state-dir",
            str(state),
            "--socket",
            str(bash_socket),
            "--agent-socket",
            str(agent_socket),
        ]
        async with running_daemon(daemon_args, stderr=daemon_log):
            _say(f"hive-bash-daemon ready on {bash_socket} (state in {state})")
            await _session(bash_socket, woken)
        _say("\nhive-bash-daemon stopped with SIGINT")
        nursery.cancel_scope.cancel()


async def _session(bash_socket: Path, woken: trio.MemoryReceiveChannel[Wake]) -> None:
    command, args = relay_command()
    params = StdioServerParameters(command=command, args=[*args, "--socket", str(bash_socket)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        _say(f"connected through hive-bash-mcp to MCP server {init.server_info.name!r}")
        tools = await session.list_tools()
        _say(f"tools: {', '.join(tool.name for tool in tools.tools)}")

        _say("\n1. a task that ends within the inline wait: the answer is its full status, no wake")
        _show(await _call(session, "run", {"cmd": "echo hello from a hive task; uname -s"}))

        _say("\n2. a task that ends later: the answer is its id, and its end wakes the agent")
        later = {"cmd": "sleep 1; echo finished later", "name": "later", "wait_seconds": 0}
        _show(await _call(session, "run", later))
        with trio.fail_after(30):
            wake = await woken.receive()
        _say(f"   the agent socket was woken by {wake.sender!r}:")
        _say(textwrap.indent(wake.body, "    | "))

        _say("\n3. a failing command: exit code and stderr come back")
        _show(await _call(session, "run", {"cmd": "echo something went wrong >&2; exit 3"}))

        _say("\n4. every task, newest first")
        _show(await _call(session, "list", {}))


async def _call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    _say(f"   -> {tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
    return await session.call_tool(tool, arguments)


def run_demo() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="hive-demo-"))
    log_path = workdir / "daemon.log"
    try:
        with open(log_path, "wb") as daemon_log:
            trio.run(_demo, workdir, daemon_log)
    except Exception as exc:  # the demo's one error boundary: say what broke, with the daemon's log
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        print(f"hive demo failed: {cause}", file=sys.stderr)
        if log:
            print("hive-bash-daemon's log:\n" + textwrap.indent(log[-4000:], "  "), file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _say("demo finished; its temporary directory is removed")
    return 0
