"""The README's quick start runs as written (see `tests.helpers.terminal`): in a fresh ``HOME``,
with this venv's programs on ``PATH`` and the fake ``claude`` (fixtures/fake_claude.py) in place
of the real one. The install line is what the README's own commands and `.ci/run` do before any
test runs: the venv running this test stands in for it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from tests.helpers.claude_fake import FakeClaude
from tests.helpers.terminal import INSTALL, open_terminal, readme_blocks, terminal_env

GUARD = 60


def test_the_readme_marks_its_runnable_blocks() -> None:
    blocks = readme_blocks()
    assert {"quick-start", "own-claude"} <= set(blocks), sorted(blocks)
    assert all(blocks.values()), blocks


@pytest.mark.parametrize("pasted", [False, True], ids=["typed", "pasted"])
async def test_the_quick_start_runs_as_written(short_tmp: Path, pasted: bool) -> None:
    # Pasted as one block (issue 38, item 10), `hive agent prompt` comes while hive-agent starts:
    # it waits for its socket, where it said "no agent socket".
    home = short_tmp  # a fresh HOME
    lines = readme_blocks()["quick-start"]
    assert [line for line in lines if line.startswith(INSTALL)] == lines[:1]
    fakes = home / "fakes"
    fakes.mkdir()
    FakeClaude(fakes).install()  # `claude` on PATH
    env = terminal_env(
        home, [fakes, Path(sys.executable).parent], {"FAKE_CLAUDE_RECORD": str(fakes / "record")}
    )
    seen = []
    with trio.fail_after(GUARD):
        async with open_terminal(home, env) as terminal:
            for line in lines[1:]:
                status, printed = await terminal.type(line, pasted=pasted)
                seen.append((line, status, printed))
                assert status == 0, seen
            assert await terminal.finish("wait %1") == 0, seen  # hive-agent's own exit status
    log = (home / "agents" / "scribe" / "turns.jsonl").read_text()
    assert "look at the failing test" in log
