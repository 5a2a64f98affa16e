"""What the harness benchmarks (14-16) share: ``hive-agent`` as a child, its agent socket, its turn log.

``hive-agent`` is the venv's console script, started with ``--with-bash-daemon`` on a private
state directory and ready once it sends ``READY=1``; it is stopped with SIGINT, as an operator
would. Its agent is ``fixtures/acp_agent.py`` (the scripted ACP agent on the official SDK) or
``fixtures/fake_claude.py``, whatever the benchmark compares.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import BIN, PYTHON, proc_status_kb

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

HIVE_AGENT = BIN / "hive-agent"
ACP_AGENT = REPO / "fixtures" / "acp_agent.py"
FAKE_CLAUDE = REPO / "fixtures" / "fake_claude.py"
POLL = 0.0002
"""How often a file another process appends to is looked at (a stat costs ~1 µs)."""


def clean_env() -> dict[str, str]:
    """This process's environment without anything that picks a runtime or a peer."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HIVE_", "FAKE_", "CLAUDE", "ANTHROPIC")) and k != "NOTIFY_SOCKET"
    }


def acp_env(root: Path, script: dict[str, Any] | None = None) -> dict[str, str]:
    """hive-agent's environment with the scripted ACP agent (its record in ``root/acp.jsonl``)."""
    env = {
        **clean_env(),
        "HIVE_RUNTIME": "acp",
        "HIVE_ACP_COMMAND": PYTHON,
        "HIVE_ACP_ARGS": json.dumps([str(ACP_AGENT)]),
        "FAKE_ACP_RECORD": str(root / "acp.jsonl"),
        "FAKE_ACP_MAX_SECONDS": "0",
    }
    if script is not None:
        (root / "acp-script.json").write_text(json.dumps(script))
        env["FAKE_ACP_SCRIPT"] = str(root / "acp-script.json")
    return env


def claude_env(root: Path) -> dict[str, str]:
    """hive-agent's (and hive run's) environment with the fake claude, playing its default turn."""
    claude = root / "claude"
    claude.write_text(f'#!/bin/sh\nexec {PYTHON} {FAKE_CLAUDE} "$@"\n')
    claude.chmod(0o755)
    return {
        **clean_env(),
        "HIVE_RUNTIME": "claude",
        "HIVE_CLAUDE_COMMAND": str(claude),
        "FAKE_CLAUDE_MAX_SECONDS": "120",
    }


@dataclass
class Agent:
    process: subprocess.Popen[bytes]
    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def socket(self) -> Path:
        return self.root / "agent.sock"

    @property
    def bash_socket(self) -> Path:
        return self.root / "bash.sock"

    @property
    def turns_log(self) -> Path:
        return self.state / "turns.jsonl"

    def rss_mb(self) -> float:
        return proc_status_kb(self.process.pid, "VmRSS") / 1024

    def peak_rss_mb(self) -> float:
        return proc_status_kb(self.process.pid, "VmHWM") / 1024


@contextlib.contextmanager
def running_agent(root: Path, env: dict[str, str], *extra: str) -> Iterator[Agent]:
    """``hive-agent --with-bash-daemon`` on ``root/state``, ready (READY=1) once this yields;
    SIGINT at the end, and its exit waited for."""
    notify_path = root / "agent-notify"
    args = [
        str(HIVE_AGENT),
        "--state-dir",
        str(root / "state"),
        "--agent-socket",
        str(root / "agent.sock"),
        "--bash-socket",
        str(root / "bash.sock"),
        "--with-bash-daemon",
        "--log-level",
        "warning",
        *extra,
    ]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify, open(root / "agent.err", "ab") as err:
        notify.bind(str(notify_path))
        notify.settimeout(0.1)
        process = subprocess.Popen(
            args,
            env={**env, "NOTIFY_SOCKET": str(notify_path)},
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            cwd=root,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"hive-agent exited with {process.returncode}: {tail(root)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"hive-agent not ready within 120 s: {tail(root)}")
                with contextlib.suppress(TimeoutError):
                    if b"READY=1" in notify.recv(4096).split(b"\n"):
                        break
            yield Agent(process, root)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def tail(root: Path) -> str:
    return (root / "agent.err").read_text(errors="replace")[-3000:]


class AgentSocket:
    """One connection to the agent socket: a request a line, its answer a line."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        answer: dict[str, Any] = json.loads(self.reader.readline())
        if not answer.get("ok"):
            raise RuntimeError(f"the agent socket refused {request}: {answer}")
        return answer

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def prompt(path: Path, text: str) -> float:
    """Send an operator message; the perf_counter just before the write."""
    conn = AgentSocket(path)
    try:
        started = time.perf_counter()
        conn.ask({"type": "prompt", "text": text})
        return started
    finally:
        conn.close()


def jsonl(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a JSONL file another process appends to (a cut last line left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def turn_records(agent: Agent) -> list[dict[str, Any]]:
    return [r for r in jsonl(agent.turns_log) if r.get("type") == "hive" and r.get("kind") == "turn"]


def wait_turns(agent: Agent, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
    """Until the turn log holds ``count`` turns' records; them.

    Only what was appended since the last look is read, and only the turn records in it are
    parsed: this process looks while the agent's turn runs, and reading the whole log at each
    change (its turn-start line among them, written just before the prompt goes out) would take
    the CPU from the agent it measures."""
    deadline = time.monotonic() + timeout
    records: list[dict[str, Any]] = []
    offset = 0
    partial = b""
    while True:
        with contextlib.suppress(FileNotFoundError):
            size = agent.turns_log.stat().st_size
            if size > offset:
                with agent.turns_log.open("rb") as file:
                    file.seek(offset)
                    data = file.read(size - offset)
                offset += len(data)
                *lines, partial = (partial + data).split(b"\n")
                for line in lines:
                    if b'"type":"hive"' in line:
                        record = json.loads(line)
                        if record.get("kind") == "turn":
                            records.append(record)
                if len(records) >= count:
                    return records
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} turns not ended after {timeout} s: {tail(agent.root)}")
        time.sleep(POLL)
