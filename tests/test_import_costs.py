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


def test_the_acp_converter_is_built_by_the_first_message() -> None:
    probe = (
        "import sys\n"
        "from hive.acp._schema import TextContent, to_wire\n"
        "assert 'cattrs' not in sys.modules\n"
        "print(to_wire(TextContent('hi')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "{'text': 'hi', 'type': 'text'}"
