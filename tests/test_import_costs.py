"""What `hive run` imports before its agent is spawned: no cattrs (its converters are built on first use).

Importing cattrs and generating the hooks of hive's wire types costs ~45 ms per backend; on the
`hive run` path that time is spent after the agent's spawn, while the agent starts (bench 10).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.helpers.claude_fake import FakeClaude
from tests.helpers.daemon import DaemonHandle
from tests.helpers.harness import GUARD, claude_env, running_agent
from tests.helpers.jsonrpc import answers_initialize


@pytest.mark.parametrize("backend", ["hive.claude", "hive.acp"])
def test_the_turn_path_imports_no_cattrs_before_the_first_message(backend: str) -> None:
    probe = f"import sys, json, hive.cli, hive.hive_run, {backend}; print(json.dumps(sorted(sys.modules)))"
    loaded = set(
        json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout)
    )
    assert backend in loaded
    assert not {name for name in loaded if name == "cattrs" or name.startswith("cattrs.")}


@pytest.mark.parametrize("backend", ["claude", "acp"])
def test_hive_run_spawns_its_agent_before_it_imports_trio(backend: str) -> None:
    """What `hive run` does before the spawn (parse, configure, the agent's command) imports
    neither Trio nor the message classes nor the backend's runtime: they load while the agent
    starts. Nor what only a turn with MCP servers needs (the file writer with its logging, a
    temporary directory): ~5 ms of every `hive run` without them."""
    probe = (
        "import sys, json\n"
        "from hive.cli import build_parser\n"
        "import hive.hive_run\n"
        "from hive.runtime import RuntimeSpec, first_command\n"
        "args = build_parser('run').parse_args(['run', 'hello'])\n"
        "env = {'HIVE_RUNTIME': sys.argv[1], 'HIVE_ACP_COMMAND': 'agent'}\n"
        "command = first_command(RuntimeSpec.from_env(env), hive.hive_run.config_from(args), 'hello', None)\n"
        "claude = sys.argv[1] == 'claude'\n"
        "assert command.stdin_data == b'hello' if claude else command.argv[0] == 'agent', command\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, backend], check=True, capture_output=True).stdout
    loaded = set(json.loads(out))
    heavy = {
        "trio",
        "cattrs",
        "hive.sink._messages",
        "hive.acp._schema",
        "hive.claude._session",
        "hive.acp._runtime",
        "hive._files",
        "logging",
        "tempfile",
    }
    assert f"hive.{backend}" in loaded
    assert not loaded & heavy, loaded & heavy


def test_the_acp_converter_is_built_by_the_first_message() -> None:
    probe = (
        "import sys\n"
        "from hive.acp._schema import TextContent, to_wire\n"
        "assert 'cattrs' not in sys.modules\n"
        "print(to_wire(TextContent('hi')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "{'text': 'hi', 'type': 'text'}"


SDK_MODULES = {"mcp", "mcp_types", "pydantic", "pydantic_core", "hypercorn", "starlette"}
"""What serving MCP once took: seconds of CPU to import, at every start of a long-lived process."""


def imported_roots(stderr: str) -> set[str]:
    """The top-level packages a process imported, read off its ``-X importtime`` lines."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


async def test_the_bash_daemon_serves_mcp_without_the_sdk(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running daemon (READY=1 said, a session answered through the relay) imported neither
    the MCP SDK nor pydantic: its MCP is the kit's (hive.daemon)."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    async with daemon.running(agent=False):
        monkeypatch.delenv("PYTHONPROFILEIMPORTTIME")
        assert await trio.to_thread.run_sync(answers_initialize, str(daemon.socket))
        imported = imported_roots(daemon.stderr_text())
    assert "trio" in imported and "hive" in imported  # the listing is there
    assert not imported & SDK_MODULES, sorted(imported & SDK_MODULES)


async def test_hive_agent_serves_its_hyperhive_tools_without_the_sdk_or_hypercorn(
    root: Path, fake: FakeClaude
) -> None:
    """hive-agent, through its READY=1 (its hyperhive tools served, their socket answering),
    imported neither the MCP SDK nor hypercorn: its hyperhive server is the kit's (hive.daemon)."""
    with trio.fail_after(GUARD):
        async with running_agent(root, {**claude_env(fake), "PYTHONPROFILEIMPORTTIME": "1"}) as agent:
            socket = agent.state / "hyperhive.sock"
            assert await trio.to_thread.run_sync(answers_initialize, str(socket), "hyperhive")
            imported = imported_roots(agent.stderr())
    assert "trio" in imported and "hive" in imported  # the listing is there
    assert not imported & SDK_MODULES, sorted(imported & SDK_MODULES)
