"""A stop at any moment of ``hive-agent``'s start stops it (issue 38, item 11): SIGINT right after
the spawn, while the harness's modules are imported, once the state directory's lock is taken,
once its hyperhive tools are served (before the runtime starts). Each time the harness exits within its grace, having
served nothing. The program is the installed ``hive-agent`` (its console script), as a person or
systemd starts it, or as a script's background job, which inherits SIGINT ignored."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from hive.runtime import STOP_GRACE
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import GUARD, claude_env
from tests.helpers.inotify import wait_until

HIVE_AGENT = Path(sys.executable).parent / "hive-agent"
STOPPING = "SIGINT: stopping before it is ready"


async def at_once(root: Path, pid: int) -> None:
    """Right after the spawn: the interpreter is still starting."""


async def while_it_imports(root: Path, pid: int) -> None:
    """While the harness's modules are imported (PYTHONPROFILEIMPORTTIME: each import, as it
    ends, on stderr): Trio is in, the rest (the runtime, the agent's modules) still to come."""
    err = root / "agent.err"
    await wait_until(lambda: " hive._state_dir\n" in err.read_text(), root)


async def once_locked(root: Path, pid: int) -> None:
    """Once the harness holds its state directory's lock (its pid is written in it)."""
    lock = root / "state" / "agent.lock"
    await wait_until(lambda: lock.exists() and lock.read_text() == f"{pid}\n", root)


async def once_hyperhive_serves(root: Path, pid: int) -> None:
    """Once the hyperhive tools are served on their socket (the runtime is still to start)."""
    err = root / "agent.err"
    await wait_until(lambda: "serving the hyperhive tools on" in err.read_text(), root)


@pytest.mark.parametrize(
    ("moment", "ignored"),
    [
        (at_once, False),
        (while_it_imports, False),
        (while_it_imports, True),
        (once_locked, False),
        (once_hyperhive_serves, False),
    ],
)
async def test_sigint_at_any_moment_of_the_start_ends_the_harness_within_its_grace(
    root: Path, fake: FakeClaude, moment: Callable[[Path, int], Awaitable[None]], ignored: bool
) -> None:
    fake.script([{"default_turn": True}])
    err = root / "agent.err"
    command = [str(HIVE_AGENT), "--state-dir", str(root / "state"), "--log-level", "debug"]
    if ignored:  # as `hive-agent ... &` in a script: bash starts its background jobs so
        command = ["sh", "-c", 'trap "" INT && exec "$@"', "sh", *command]
    with trio.fail_after(GUARD), open(err, "wb") as stderr:
        process = await trio.lowlevel.open_process(
            command,
            env={**os.environ, **claude_env(fake), "PYTHONPROFILEIMPORTTIME": "1"},
            stderr=stderr,
            cwd=root,
        )
        try:
            await moment(root, process.pid)
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(STOP_GRACE):
                await process.wait()
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGKILL)  # the test failed: nothing left behind
                await process.wait()
                pytest.fail(f"hive-agent was still running {STOP_GRACE} s after SIGINT:\n{err.read_text()}")
    said = err.read_text()
    if moment is at_once:
        # Before the interpreter runs a line of hive, SIGINT ends it as it ends any program.
        assert process.returncode in (0, -signal.SIGINT), said
    else:
        assert process.returncode == 0, said
        # Once hyperhive serves (a Unix socket now, in a moment), the harness may be ready as
        # the signal comes: then it stops as a ready one does.
        stopped = STOPPING in said or (moment is once_hyperhive_serves and "SIGINT: stopping" in said)
        assert stopped and "Traceback" not in said, said
    assert not (root / "state" / "agent.sock").exists()
    assert not (root / "state" / "hyperhive.sock").exists()
    assert fake.starts() == []
