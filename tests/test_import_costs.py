"""What `hive run` imports before its agent is spawned: no cattrs (its converters are built on first use).

Importing cattrs and generating the hooks of hive's wire types costs ~45 ms per backend; on the
`hive run` path that time is spent after the agent's spawn, while the agent starts (bench 10).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("backend", ["hive.claude", "hive.acp"])
def test_the_turn_path_imports_no_cattrs_before_the_first_message(backend: str) -> None:
    probe = f"import sys, json, hive.cli, hive.turn, {backend}; print(json.dumps(sorted(sys.modules)))"
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
        "import hive.turn\n"
        "from hive.runtime import RuntimeSpec, first_command\n"
        "args = build_parser('run').parse_args(['run', 'hello'])\n"
        "env = {'HIVE_RUNTIME': sys.argv[1], 'HIVE_ACP_COMMAND': 'agent'}\n"
        "command = first_command(RuntimeSpec.from_env(env), hive.turn.config_from(args), 'hello', None)\n"
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
