"""``hive demo``: the whole loop of an agent (hive-agent, its daemon, the scripted demo agent), run as the operator would run it."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import trio


def processes_mentioning(text: str) -> list[str]:
    """The command lines of live processes that mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # it exited while we looked
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


async def test_demo_runs_the_whole_loop_and_cleans_up(short_tmp: Path) -> None:
    # Its temporary directory goes under short_tmp, so anything left behind is easy to see.
    env = {**os.environ, "TMPDIR": str(short_tmp)}
    with trio.fail_after(180):
        done = await trio.run_process(
            [sys.executable, "-m", "hive.cli", "demo"],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr.decode()}"
    assert "SCRIPTED demo ACP agent (no model, no API key" in out

    state = re.search(r"state directory: (\S+)", out)
    assert state, out
    workdir = Path(state[1]).parent
    assert workdir.parent == short_tmp

    # The loop: the operator's message starts a turn; the task's end wakes the next one.
    first = out.index("turn 1 ended (completed); it carried: prompt from operator")
    second = out.index("turn 2 ended (completed); it carried: wake from bash-task-demo")
    assert first < second < out.index("hive-agent stopped with SIGINT (exit status 0)")

    # The turn log, rendered: turn 1 ran the task through the relay and listed it as a loose end...
    log = out[out.index("The turn log, as `hive agent log` shows it:") :]
    turn1 = log[log.index("── turn 1 ·") : log.index("── turn 2 ·")]
    assert "message from operator: Show me the loop" in turn1
    assert "[scripted demo agent: no model" in turn1
    assert "→ mcp__bash__run {" in turn1
    assert "← task started: id=demo" in turn1
    assert "→ mcp__hyperhive__loose_ends {}" in turn1
    assert (
        "← 1 loose end: bash tasks whose end you have not been told yet (0 ended, 1 still running)" in turn1
    )
    assert "ended: completed" in turn1
    # ... and turn 2's prompt held the wake's body, and the loose end was gone.
    turn2 = log[log.index("── turn 2 ·") :]
    assert "wake from bash-task-demo: bash task demo ended: done, exit code 0" in turn2
    assert "Its output: hello from a background task, released with: go" in turn2
    assert "← No loose ends" in turn2
    assert "ended: completed" in turn2

    assert out.rstrip().endswith("demo finished; its temporary directory is removed")
    # Nothing left behind: not its directory, nor the readiness socket's...
    assert not workdir.exists()
    assert list(await trio.Path(short_tmp).iterdir()) == []
    # ... nor hive-agent, its daemon, the demo agent, a relay, or the task.
    assert processes_mentioning(str(workdir)) == []


async def test_a_within_of_no_time_is_refused_before_anything_starts() -> None:
    for within in ("0", "-1"):
        with trio.fail_after(30):
            done = await trio.run_process(
                [sys.executable, "-m", "hive.cli", "demo", "--within", within],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        assert done.returncode == 2, done.stderr
        assert done.stdout == b""
        assert (
            f"argument --within: {within!r} must be more than 0 seconds: give the seconds the demo may take"
            in done.stderr.decode()
        )
