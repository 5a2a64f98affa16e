"""``hive demo``: the whole loop of an agent on built-in defaults, with no model and no API key.

It runs ``hive-agent`` (``--with-bash-daemon``) on a temporary state directory, with the scripted
demo ACP agent (``hive.demo_agent``) as its agent, and sends it one operator message. The agent's
first turn starts a background task through the ``bash`` relay and calls the hyperhive tool
``loose_ends`` through its relay; the task's end wakes the harness, and a second turn starts with the
wake's body in its prompt. The demo then stops ``hive-agent`` with SIGINT, prints the turn log
through ``hive agent log``'s renderer, and removes its directory.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from contextlib import aclosing
from pathlib import Path
from typing import Any, BinaryIO

import trio

from hive._files import create_new
from hive._follow import follow_lines
from hive._when import in_seconds
from hive.agent import render_log
from hive.agent_socket import Prompt, open_agent_connection
from hive.bash import running_daemon
from hive.errors import HiveError

TURNS = 2
WITHIN = 120.0
"""How long the demo waits for the agent to be ready and for its two turns, in all."""
FIRST_MESSAGE = "Show me the loop: start a background task, check your loose ends, and wait for its end."


class DemoTooSlow(HiveError, TimeoutError):
    """hive-agent was not ready, or did not end its two turns, within the seconds it was given."""


def _say(text: str = "") -> None:
    print(text, flush=True)


def agent_environment() -> dict[str, str]:
    """hive-agent's environment: the scripted demo agent as its ACP agent."""
    return {
        **os.environ,
        "HIVE_RUNTIME": "acp",
        "HIVE_ACP_COMMAND": sys.executable,
        "HIVE_ACP_ARGS": json.dumps(["-m", "hive.demo_agent"]),
    }


async def _turn_records(log_path: Path, count: int) -> list[dict[str, Any]]:
    """The first ``count`` turns' records (``{"type":"hive"}`` lines) of the turn log, as they come."""
    records: list[dict[str, Any]] = []
    async with aclosing(follow_lines(log_path)) as lines:
        async for line in lines:
            obj = json.loads(line) if line.strip() else None
            if isinstance(obj, dict) and obj.get("type") == "hive" and obj.get("kind") == "turn":
                records.append(obj)
                carried = ", ".join(
                    f"{item.get('kind')} from {item.get('from')}" for item in obj.get("carried", ())
                )
                _say(f"turn {obj.get('turn')} ended ({obj.get('outcome', '?')}); it carried: {carried}")
                if len(records) == count:
                    return records
    raise AssertionError("unreachable: follow_lines never ends")


async def _demo(workdir: Path, agent_log: BinaryIO, within: float) -> list[str]:
    state = workdir / "state"
    agent_socket = workdir / "agent.sock"
    args = [
        "--state-dir",
        str(state),
        "--agent-socket",
        str(agent_socket),
        "--bash-socket",
        str(workdir / "bash.sock"),
        "--with-bash-daemon",
    ]
    log_path = state / "turns.jsonl"
    with trio.move_on_after(within) as waited:
        async with running_daemon(
            args,
            env=agent_environment(),
            stderr=agent_log,
            module="hive.agent.harness",
            name="hive-agent",
            cwd=workdir,
        ) as agent:
            _say(f"hive-agent ready (pid {agent.pid}): its bash daemon, the hyperhive tools, the demo agent")
            _say(f"  state directory: {state}")
            log_path.touch()  # followed from its start, before the first turn writes to it
            async with open_agent_connection(agent_socket) as connection:
                await connection.request(Prompt(FIRST_MESSAGE))
            _say(f"sent the agent a message over {agent_socket}: {FIRST_MESSAGE!r}")
            await _turn_records(log_path, TURNS)
        _say(f"hive-agent stopped with SIGINT (exit status {agent.returncode})")
    if waited.cancelled_caught:
        raise DemoTooSlow(f"the demo's hive-agent did not finish its two turns within {in_seconds(within)}")
    objects = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    return list(render_log(obj for obj in objects if isinstance(obj, dict)))


def run_demo(within: float = WITHIN) -> int:
    """The demo, start to end, in ``within`` seconds at most; its exit status. A failure shows
    hive-agent's log on stderr, then raises (for ``hive``'s boundary to report on one line)."""
    _say("hive demo: hive-agent runs a SCRIPTED demo ACP agent (no model, no API key: its steps are fixed)")
    _say("")
    workdir = Path(tempfile.mkdtemp(prefix="hive-demo-"))
    agent_log_path = workdir / "hive-agent.log"
    try:
        with os.fdopen(create_new(agent_log_path), "wb") as agent_log:
            try:
                rendered = trio.run(_demo, workdir, agent_log, within)
            except Exception:
                agent_log.flush()
                sys.stderr.write("hive demo failed; hive-agent's log:\n")
                sys.stderr.write(agent_log_path.read_text(errors="replace"))
                raise
        _say("")
        _say("The turn log, as `hive agent log` shows it:")
        _say("")
        for line in rendered:
            _say(line)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _say("demo finished; its temporary directory is removed")
    return 0
