"""The README's snippet for giving one's own claude the bash tools runs as written, with the real
Claude Code CLI (offline, against the fake API) on ``PATH`` as ``claude``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from fixtures.fake_api_control import FakeApi
from tests.helpers.terminal import open_terminal, readme_blocks, terminal_env

GUARD = 90


async def test_the_own_claude_snippet_gives_claude_the_bash_tools(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_home: Path, tmp_path: Path
) -> None:
    lines = readme_blocks()["own-claude"]
    assert any(line.startswith("claude ") for line in lines), lines
    fake_api.set_scenario(
        {
            "mode": "tool",
            "tool": "mcp__bash__run",
            "input": {"cmd": "uname -a"},
            "after_tool_text": "Started.",
        }
    )
    peers = tmp_path / "peers"
    peers.mkdir()
    (peers / "claude").symlink_to(real_claude)
    offline = {k: v for k, v in claude_env.items() if k not in ("HOME", "PATH")}
    env = terminal_env(claude_home, [peers, Path(sys.executable).parent], offline)
    work = tmp_path / "work"
    work.mkdir()
    seen = []
    with trio.fail_after(GUARD):
        async with open_terminal(work, env) as terminal:
            for line in lines:
                status, printed = await terminal.type(line)
                seen.append((line, status, printed))
                assert status == 0, seen
            assert await terminal.finish("kill -INT %1 && wait %1") == 0, seen
    (after,) = [r for r in fake_api.requests(kind="main") if r["tool_results"]]
    (result,) = after["tool_results"]
    assert not result["is_error"], result
    # Claude Code gives the model the tool's structured content: the daemon's short answer, inline
    # (what the model acts on; the command and the rest come with full).
    answer = json.loads(result["text"])
    assert (answer["state"], answer["exit_code"]) == ("done", 0), answer
    assert answer["stdout"]["tail"].startswith("Linux") and "cmd" not in answer, answer
