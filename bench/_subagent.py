"""What the subagent benchmarks share: a scripted agent, ``hive-subagent-mcp`` as a raw JSON-RPC
child, its daemon's pid and its stop.

The scripted agent is ``fixtures/fake_claude.py`` behind a ``claude`` wrapper (``exec python
fake_claude.py``), playing its default turn (init, one text block, a result), the same for every
arm that is compared.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import BIN, PYTHON, StdioClient, structured

REPO = Path(__file__).resolve().parent.parent
SERVER = BIN / "hive-subagent-mcp"
FAKE_CLAUDE = REPO / "fixtures" / "fake_claude.py"


def fake_claude(root: Path) -> Path:
    executable = root / "claude"
    executable.write_text(f'#!/bin/sh\nexec {PYTHON} {FAKE_CLAUDE} "$@"\n')
    executable.chmod(0o755)
    return executable


def environment(root: Path, claude: Path) -> dict[str, str]:
    """The environment a parent agent would give the server: the state dir, the runtime, no wakes."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HIVE_", "FAKE_", "CLAUDE", "ANTHROPIC")) and k != "NOTIFY_SOCKET"
    }
    return {
        **base,
        "HIVE_STATE_DIR": str(root / "state"),
        "HIVE_RUNTIME": "claude",
        "HIVE_CLAUDE_COMMAND": str(claude),
        "FAKE_CLAUDE_MAX_SECONDS": "120",
    }


@contextlib.contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """This process's environment is ``env`` for the block (StdioClient's child inherits it)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def server(root: Path, env: dict[str, str]) -> Iterator[StdioClient]:
    """``hive-subagent-mcp`` with its MCP handshake done; its daemon stopped at the end."""
    with environ(env):
        client = StdioClient([str(SERVER)], root / "server.err")
    try:
        client.handshake()
        yield client
    finally:
        client.close()
        stop_daemon(Path(env["HIVE_STATE_DIR"]))


def daemon_pid(state: Path) -> int | None:
    try:
        text = (state / "subagent-daemon.lock").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


def stop_daemon(state: Path, timeout: float = 60.0) -> None:
    """SIGINT to the daemon serving ``state`` (it is no child of ours), and wait for its exit."""
    pid = daemon_pid(state)
    if pid is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGINT)
        if not select.select([fd], [], [], timeout)[0]:
            raise RuntimeError(f"the subagent daemon (pid {pid}) did not exit within {timeout} s of SIGINT")
    finally:
        os.close(fd)
    (state / "subagent-daemon.lock").unlink(missing_ok=True)


def first_line_after(path: Path, started: float, timeout: float = 60.0) -> float:
    """Seconds from ``started`` until ``path`` holds a whole line; looked at every 0.2 ms (a file
    another process writes has nothing to wait on, and a stat costs ~1 µs)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if path.stat().st_size and b"\n" in path.read_bytes()[:65536]:
                return time.perf_counter() - started
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no line in {path} after {timeout} s")
        time.sleep(0.0002)


def wait_idle(client: StdioClient, name: str | None = None, turns: int = 1) -> list[dict[str, Any]]:
    """Until every subagent (or ``name``) has ended ``turns`` turns and holds no slot."""
    while True:
        arguments: dict[str, Any] = {"wait_seconds": 30}
        if name is not None:
            arguments["name"] = name
        request = client.tool_request("status", **arguments)
        client.send([request])
        (_, answer) = client.wait([request["id"]])[request["id"]]
        sessions = structured(answer)["subagents"]
        if all(s["slot"] is None and s["turns"] >= turns and s["last_turn"] for s in sessions):
            return list(sessions)
