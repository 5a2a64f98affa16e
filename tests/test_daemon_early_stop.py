"""A stop that comes while a daemon imports its modules ends it quietly (status 0, no
traceback), as one that comes after them does. A harness that dies takes its daemons with it
by SIGINT, often while they start; each such stop printed a KeyboardInterrupt's traceback into
the operator's log (the soak of issue 38 saw one each few restarts)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from tests.helpers.harness import GUARD
from tests.helpers.inotify import wait_until

DAEMONS = {
    "bash": ("hive.bash.daemon", "--socket", "bash.sock"),
    "subagent": ("hive.subagent.daemon", "--socket", "subagent.sock"),
}


@pytest.mark.parametrize("daemon", sorted(DAEMONS))
async def test_sigint_while_a_daemon_imports_ends_it_quietly(root: Path, daemon: str) -> None:
    module, flag, socket_name = DAEMONS[daemon]
    err = root / "daemon.err"
    command = [
        sys.executable,
        "-m",
        module,
        "--state-dir",
        str(root / "state"),
        flag,
        str(root / socket_name),
    ]
    with trio.fail_after(GUARD), open(err, "wb") as stderr:
        process = await trio.lowlevel.open_process(
            command, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}, stderr=stderr, cwd=root
        )
        try:
            # argparse is the daemon module's first import of its own: it is importing the rest.
            await wait_until(lambda: "| argparse\n" in err.read_text(), root)
            process.send_signal(signal.SIGINT)
            await process.wait()
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGKILL)
                await process.wait()
    said = err.read_text()
    assert process.returncode == 0, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    assert not (root / socket_name).exists()
