"""``hive-agent`` as a real process for a test: its start and stop, its agents' environments, the
fake claude's starts, and the turn log's lines as they appear."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing, asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio

from fixtures import acp_agent
from hive.agent import follow_lines
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.inotify import wait_until

GUARD = 120
"""A guard only, against a hang: a harness test that restarts hive-agent twice takes minutes on two
cores under stress --cpu 2 beside the rest of the suite."""


@contextmanager
def scratch_root(prefix: str, kill_events: Sequence[str] = ("start", "spawned")) -> Iterator[Path]:
    """A short temporary directory for a harness and its agents; at the end, every agent process
    the fakes recorded (events ``kill_events``) is SIGKILLed and the directory removed."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        for record in (path / "acp-record.jsonl", path / "record.jsonl"):
            for event in acp_agent.read_record(record):
                if event["event"] in kill_events:
                    with suppress(ProcessLookupError):
                        os.kill(event["pid"], signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def installed_fake(root: Path) -> Iterator[FakeClaude]:
    """The fake claude, installed under ``root`` for the duration of the block."""
    claude = FakeClaude(root).install()
    try:
        yield claude
    finally:
        claude.cleanup()


@attrs.define
class Agent:
    """A running hive-agent."""

    root: Path
    process: trio.Process

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def socket(self) -> Path:
        return self.state / "agent.sock"

    def stderr(self) -> str:
        path = self.root / "agent.err"
        return path.read_text(errors="replace") if path.exists() else ""

    async def hive_line(self, predicate: Callable[[dict[str, Any]], bool] = lambda _: True) -> dict[str, Any]:
        """The first ``{"type":"hive"}`` line of the turn log that satisfies ``predicate``."""
        return await wait_line(self.state / "turns.jsonl", lambda o: o.get("type") == "hive" and predicate(o))

    async def carried_line(self) -> dict[str, Any]:
        """The first ``carried`` line of the queue's journal: a turn that carried messages has
        ended and left its running phase (the line follows its turn-log line, and a stop from
        then on names no running turn)."""
        return await wait_line(self.state / "queue", lambda o: o.get("op") == "carried")

    def hive_lines(self) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in (self.state / "turns.jsonl").read_bytes().splitlines()]
        return [line for line in lines if line.get("type") == "hive"]


async def wait_line(path: Path, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with aclosing(follow_lines(path)) as lines:
        async for line in lines:
            if line.strip():
                found: dict[str, Any] = json.loads(line)
                if predicate(found):
                    return found
    raise AssertionError("unreachable: follow_lines never ends")


async def wait_gone(path: Path) -> None:
    """Until ``path`` is gone (removed by another process)."""
    await wait_until(lambda: not path.exists(), path.parent)


async def start_until_ready(argv: list[str], root: Path, env: dict[str, str], **options: Any) -> trio.Process:
    """Start ``argv`` (a hive-agent) with ``env`` and a NOTIFY_SOCKET under ``root``, its stderr
    appended to ``root/agent.err``; return once it says READY=1. An exit before then fails the test
    with its stderr; an exit, a cancel or a failure of the wait SIGINTs it and awaits its exit."""
    notify_path = root / "notify"
    notify_path.unlink(missing_ok=True)  # a previous start's
    notify = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with notify:
        await notify.bind(os.fspath(notify_path))
        with open(root / "agent.err", "ab") as err:
            process = await trio.lowlevel.open_process(
                argv, env={**env, "NOTIFY_SOCKET": os.fspath(notify_path)}, stderr=err, **options
            )
        try:
            async with trio.open_nursery() as nursery:

                async def exited() -> None:
                    await process.wait()
                    said = (root / "agent.err").read_text(errors="replace")[-4000:]
                    raise AssertionError(
                        f"hive-agent in {root} exited {process.returncode} before READY=1:\n{said}"
                    )

                nursery.start_soon(exited)
                while b"READY=1" not in (await notify.recv(4096)).split(b"\n"):
                    pass
                nursery.cancel_scope.cancel()
        except BaseException:
            await stopped(process)
            raise
    return process


async def stopped(process: trio.Process) -> None:
    """SIGINT to ``process`` if it runs, and its exit awaited (within `GUARD`, even when cancelled)."""
    if process.returncode is None:
        process.send_signal(signal.SIGINT)
        with trio.move_on_after(GUARD, shield=True):
            await process.wait()


@asynccontextmanager
async def running_agent(
    root: Path,
    env: dict[str, str],
    *args: str,
    cwd: Path | None = None,
    whole_env: bool = False,
    new_session: bool = False,
    wrapper: Sequence[str] = (),
) -> AsyncIterator[Agent]:
    """hive-agent on ``root/state`` until the block ends (then SIGINT, and its exit awaited).
    ``env`` goes over this process's environment, or is the whole of it (``whole_env``);
    ``new_session``: it leads a process group of its own, as a shell's job does; ``wrapper``: a
    command line it is started under (which execs it)."""
    process = await start_until_ready(
        [*wrapper, sys.executable, "-m", "hive.agent.harness", "--state-dir", str(root / "state"), *args],
        root,
        {**({} if whole_env else os.environ), **env},
        cwd=cwd or root,
        start_new_session=new_session,
    )
    try:
        yield Agent(root, process)
    finally:
        await stopped(process)


def acp_env(root: Path, turns: list[Any]) -> dict[str, str]:
    acp_agent.write_script(root / "acp-script.json", turns)
    agent_env = {
        "FAKE_ACP_SCRIPT": str(root / "acp-script.json"),
        "FAKE_ACP_RECORD": str(root / "acp-record.jsonl"),
        "FAKE_ACP_STATE": str(root / "acp-state"),
        "FAKE_ACP_MAX_SECONDS": "120",
    }
    return acp_runtime_env(agent_env)


def acp_runtime_env(agent_env: dict[str, str]) -> dict[str, str]:
    """hive's environment for the ACP fixture as its agent, run with ``agent_env``."""
    return {
        "HIVE_RUNTIME": "acp",
        "HIVE_ACP_COMMAND": sys.executable,
        "HIVE_ACP_ARGS": json.dumps([acp_agent.PATH]),
        "HIVE_ACP_ENV": json.dumps(agent_env),
    }


def claude_env(fake: FakeClaude) -> dict[str, str]:
    return {"HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": str(fake.executable), **dict(fake.env())}


async def claude_start(fake: FakeClaude, number: int) -> dict[str, Any]:
    """The fake claude's ``number``-th start (1-based), once it is recorded."""
    starts: list[dict[str, Any]] = []

    def nth(event: dict[str, Any]) -> bool:
        if event["event"] == "start":
            starts.append(event)
        return len(starts) == number

    return await wait_line(fake.record_path, nth)


HOLD = [{"init": {}}, {"text": "working"}, {"wait_for_signal": "SIGUSR1"}, {"text": "done"}, {"result": {}}]
"""A claude turn that waits for SIGUSR1 to end."""


async def release(fake: FakeClaude, start: dict[str, Any]) -> None:
    await wait_line(fake.record_path, lambda e: e["event"] == "start" and e["pid"] == start["pid"])
    os.kill(start["pid"], signal.SIGUSR1)
