"""One permission policy on both backends, with the real peers: the same file write is refused
under ``default`` and done under ``allow``, by the Claude Code CLI and by claude-agent-acp alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from fixtures.fake_api_control import FakeApi
from hive.runtime import Permission, StopReason
from hive.sink import MemorySink
from tests.real.test_real_acp import acp_runtime
from tests.real.test_real_claude import claude_runtime

TURN = 120


@pytest.mark.parametrize("backend", ["claude", "acp"])
@pytest.mark.parametrize(("permission", "written"), [(Permission.DEFAULT, False), (Permission.ALLOW, True)])
async def test_a_file_write_is_refused_or_allowed_alike_on_both_backends(
    real_peer: Path,
    fake_api: FakeApi,
    claude_env: dict[str, str],
    claude_workdir: Path,
    backend: str,
    permission: Permission,
    written: bool,
) -> None:
    marker = claude_workdir / "marker"
    fake_api.set_scenario({"mode": "bash", "command": f"touch {marker}", "after_tool_text": "Done."})
    opened_by = claude_runtime if backend == "claude" else acp_runtime
    runtime = opened_by(real_peer, claude_env, claude_workdir, permission=permission)
    with trio.fail_after(TURN):
        async with runtime as opened:
            outcome = await opened.run("make the marker", MemorySink())
    assert outcome.stop_reason is StopReason.COMPLETED
    assert marker.exists() is written
