"""``hive demo``: the bash service end to end, run as the operator would run it."""

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


async def test_demo_runs_end_to_end_and_cleans_up(short_tmp: Path) -> None:
    # Its temporary directories go under short_tmp, so anything left behind is easy to see.
    env = {**os.environ, "TMPDIR": str(short_tmp)}
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "hive.cli", "demo"],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = done.stdout.decode()
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr.decode()}"

    # The paths it used, as it printed them.
    agent_socket = re.search(r"demo agent socket listening on (\S+)", out)
    ready = re.search(r"hive-bash-daemon ready on (\S+) \(state in (\S+)\)", out)
    assert agent_socket and ready, out
    workdir = Path(agent_socket[1]).parent
    assert workdir.parent == short_tmp
    assert Path(ready[1]).parent == workdir
    assert Path(ready[2]).parent == workdir

    # 1. the inline task's output
    assert "    | hello from a hive task" in out
    assert f"    | {os.uname().sysname}" in out
    # 2. the later task: its id at once, then its wake
    assert "task started: id=later" in out
    woken = out.index("the agent socket was woken by 'bash-task-later'")
    assert out.index("task started: id=later") < woken
    assert "    | finished later" in out[woken:]
    # 3. the failing task's exit code and stderr
    failing = out.index("3. a failing command")
    assert "exit code 3" in out[failing:]
    assert "    | something went wrong" in out[failing:]
    # 4. the list: every task, the later one among them, a header first
    listing = out[out.index("4. every task, newest first") :]
    assert "    | id\tstate\texit\tduration\tcommand" in listing
    rows = [line for line in listing.splitlines() if line.startswith("    | ") and "\t" in line][1:]
    assert len(rows) == 3
    assert rows[1].startswith("    | later\tdone\t0\t")
    assert "\tdone\t3\t" in rows[0]

    assert "demo finished; its temporary directory is removed" in out
    # Nothing left behind: not its directory, nor the daemon's readiness socket directory...
    assert not workdir.exists()
    assert list(await trio.Path(short_tmp).iterdir()) == []
    # ... nor the daemon, nor the relay, nor any task.
    assert processes_mentioning(str(workdir)) == []
