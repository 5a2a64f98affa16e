"""A small fleet run as users run it, with an operator and faults: the scenario runner.

Each agent is a real ``hive-agent --with-bash-daemon`` (one with ``--subagents``) on the fake
claude, whose turns make real tool calls through the real bash relay (`tests.scenario.plan`). An
operator prompts the agents with ``hive agent prompt``, watches their tasks with ``hive bash
status --wait``, ``tail -f`` and ``stop``, and stops tasks through a real ``hive web``; faults
SIGKILL a bash daemon, a subagent daemon or a harness (restarted as systemd would). At the end the
fleet is let settle (every end told, every message carried), stopped with SIGINT, and what it
recorded is checked (`tests.scenario.checks`). Every process the fleet starts carries
``HIVE_SCENARIO_TAG`` in its environment, so that what is left of it can be found.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio

from fixtures import acp_agent, fake_claude
from hive.agent_socket import Status, open_agent_connection
from tests.helpers.daemon import tail_follow_argv
from tests.helpers.harness import acp_runtime_env, start_until_ready
from tests.helpers.web import base_of
from tests.scenario.plan import Action, AgentPlan, agent_plan, schedule

TAG = "HIVE_SCENARIO_TAG"
START_WITHIN = 180.0
SETTLE_WITHIN = 120.0
STOP_WITHIN = 60.0
"""Guards only: a harness's start, the fleet's settling once the schedule is over, a harness's
stop (a harness still running then is reported by the checks)."""


KILLED_DAEMONS = {"kill_bash_daemon": "hive.bash.daemon", "kill_subagent_daemon": "hive.subagent.daemon"}
"""The faults that SIGKILL a daemon of an agent's harness, and the module the daemon runs."""


@attrs.define
class Operated:
    """What the operator did and saw, for the checks."""

    prompts: list[tuple[int, str, int]] = attrs.field(factory=list)
    """(agent, body, exit status of `hive agent prompt`)."""
    observed: list[tuple[int, str, str, int]] = attrs.field(factory=list)
    """(agent, kind, task, exit status)."""
    faults: list[tuple[int, str, int | None]] = attrs.field(factory=list)
    """(agent, kind, pid killed)."""
    stops: list[tuple[int, int | None]] = attrs.field(factory=list)
    """(agent, exit status of its harness on SIGINT at the end; None: still running)."""


@attrs.define(eq=False)
class AgentRun:
    """One agent of the fleet: its plan, its directories, its harness process (restartable)."""

    index: int
    plan: AgentPlan
    root: Path
    state: Path
    env: dict[str, str]
    process: trio.Process | None = None
    starts: int = 0
    restarting: trio.Lock = attrs.field(factory=trio.Lock)

    @property
    def record(self) -> Path:
        """The fake agent's record (of either fake: one JSON object a line)."""
        return self.root / "record.jsonl"

    def argv(self) -> list[str]:
        extra = ["--subagents"] if self.plan.subagents else []
        return [
            sys.executable,
            "-m",
            "hive.agent.harness",
            "--state-dir",
            str(self.state),
            "--with-bash-daemon",
            *extra,
        ]

    async def start(self) -> None:
        """Start the harness and wait for its READY=1."""
        self.starts += 1
        try:
            with trio.fail_after(START_WITHIN):
                self.process = await start_until_ready(
                    self.argv(),
                    self.root,
                    {**os.environ, **self.env},
                    stdin=subprocess.DEVNULL,
                    cwd=self.root,
                )
        except trio.TooSlowError:
            said = (self.root / "agent.err").read_text(errors="replace")[-2000:]
            raise AssertionError(
                f"hive-agent {self.plan.name} did not say READY=1 within {START_WITHIN:g} s:\n{said}"
            ) from None

    async def kill(self) -> int | None:
        """SIGKILL the harness (what a crash or an OOM kill does) and wait for it."""
        process = self.process
        if process is None or process.returncode is not None:
            return None
        process.send_signal(signal.SIGKILL)
        await process.wait()
        return process.pid

    async def stop(self) -> int | None:
        """SIGINT, as systemd or the operator stops it; its exit status."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            await process.wait()
        return process.returncode

    def child(self, module: str) -> int | None:
        """The pid of a process of the harness's tree running ``module`` (its daemons)."""
        if self.process is None:
            return None
        for pid in descendants(self.process.pid):
            with suppress(OSError):
                if module.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
        return None


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        with suppress(OSError):
            for task in os.listdir(f"/proc/{parent}/task"):
                with suppress(OSError):
                    children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
                    found += map(int, children)
                    todo += map(int, children)
    return found


def tagged(tag: str) -> list[int]:
    """Every process whose environment carries ``HIVE_SCENARIO_TAG=tag``."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
    return found


@attrs.define(eq=False)
class Fleet:
    seed: int
    root: Path
    agents: list[AgentRun]
    tag: str
    operated: Operated = attrs.field(factory=Operated)
    web_url: str | None = None
    web_token: str = ""
    prompted: int = 0
    small_disk: Path | None = None
    """The state dir on a small tmpfs (of agent `disk_agent`), which `disk_full` fills."""
    disk_agent: int = 1
    disk_filling: bool = False

    async def act(self, action: Action, nursery: trio.Nursery) -> None:
        agent = self.agents[action.agent]
        kind = action.kind
        if kind == "prompt":
            nursery.start_soon(self._prompt, agent, action)
        elif kind == "status_wait":
            nursery.start_soon(
                self._observe, agent, ["status", action.target, "--wait", "2"], "status_wait", action
            )
        elif kind == "tail":
            nursery.start_soon(self._tail, agent, action)
        elif kind == "stop":
            nursery.start_soon(self._observe, agent, ["stop", action.target], "stop", action)
        elif kind == "web_stop":
            nursery.start_soon(self._web_stop, agent, action)
        elif kind in KILLED_DAEMONS:
            pid = agent.child(KILLED_DAEMONS[kind])
            if pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.operated.faults.append((action.agent, kind, pid))
        elif kind == "disk_full":
            if self.small_disk is not None and not self.disk_filling:
                nursery.start_soon(self._fill_disk, action)
        elif kind == "kill_harness":
            nursery.start_soon(self._restart, agent, action)

    async def _fill_disk(self, action: Action) -> None:
        """Fill the small disk an agent's state is on, leave it full a moment, then free it."""
        assert self.small_disk is not None
        self.disk_filling = True
        filler = self.small_disk / "filler"

        def fill() -> None:
            with open(filler, "ab", buffering=0) as f, suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)

        await trio.to_thread.run_sync(fill)
        self.operated.faults.append((self.disk_agent, action.kind, None))
        await trio.sleep(action.delay * 3)
        filler.unlink()
        self.disk_filling = False

    async def _restart(self, agent: AgentRun, action: Action) -> None:
        """SIGKILL the harness and start it again, as systemd restarts a service that died; the
        operator goes on meanwhile (a prompt to an agent that is down is refused, and not counted)."""
        async with agent.restarting:
            pid = await agent.kill()
            self.operated.faults.append((action.agent, action.kind, pid))
            if pid is not None:
                await agent.start()

    async def _prompt(self, agent: AgentRun, action: Action) -> None:
        body = f"operator {self.prompted} to {agent.plan.name}"
        self.prompted += 1
        done = await hive("agent", "prompt", "--state-dir", str(agent.state), body)
        self.operated.prompts.append((action.agent, body, done.returncode))

    async def _observe(self, agent: AgentRun, words: list[str], kind: str, action: Action) -> None:
        done = await hive("bash", *words, "--state-dir", str(agent.state))
        self.operated.observed.append((action.agent, kind, action.target, done.returncode))

    async def _tail(self, agent: AgentRun, action: Action) -> None:
        argv = tail_follow_argv(action.target, "--state-dir", str(agent.state))
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with trio.move_on_after(3):
            await process.wait()
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            await process.wait()
        self.operated.observed.append((action.agent, "tail", action.target, process.returncode))

    async def _web_stop(self, agent: AgentRun, action: Action) -> None:
        assert self.web_url is not None
        url, token, name = self.web_url, self.web_token, agent.state.name

        def post() -> int:
            host = url.split("://", 1)[1]
            connection = http.client.HTTPConnection(host, timeout=30)
            try:
                connection.request(
                    "POST",
                    f"/agent/{name}/tasks/{action.target}/stop",
                    headers={"Authorization": f"Bearer {token}", "Origin": url},
                )
                return connection.getresponse().status
            finally:
                connection.close()

        status = await trio.to_thread.run_sync(post)
        self.operated.observed.append((action.agent, "web_stop", action.target, status))

    async def settled(self) -> bool:
        """Whether every agent is idle with nothing queued and no end owed."""
        for agent in self.agents:
            if any((agent.state / "mcp-loose-ends").glob("*.json")):
                return False
            try:
                async with open_agent_connection(agent.state / "agent.sock") as connection:
                    reply = await connection.request(Status())
            except OSError:
                return False
            status = reply.status
            if status is None or status.state != "idle" or status.queue or status.carrying:
                return False
            if any(s.get("current") or not (s.get("last") or {}).get("told", True) for s in subagents(agent)):
                return False
        return True


async def hive(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *args], capture_stdout=True, capture_stderr=True, check=False
    )


@asynccontextmanager
async def web_server(fleet: Fleet) -> AsyncIterator[None]:
    """A real ``hive web`` over the fleet's agents, for the operator's stops."""
    token_file = fleet.root / "web-token"
    fleet.web_token = uuid.uuid4().hex
    token_file.write_text(fleet.web_token)
    argv = [
        sys.executable,
        "-m",
        "hive.cli",
        "web",
        str(fleet.root / "agents"),
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        str(token_file),
    ]
    with open(fleet.root / "web.err", "ab") as err:
        process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, stderr=err)
    assert process.stdout is not None
    try:
        seen = b""
        with trio.fail_after(START_WITHIN):
            while b"http://" not in seen or not seen.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, f"hive web ended before it printed its address: {seen!r}"
                seen += chunk
        # It prints its URL without the token, which it names the file of: the runner knows it.
        assert fleet.web_token not in seen.decode(), seen
        fleet.web_url = base_of(seen.decode())
        yield
    finally:
        process.send_signal(signal.SIGINT)
        with trio.move_on_after(30, shield=True):
            await process.wait()


ACP_AGENT = 2
"""The agent that runs on the ACP fixture (the others on the fake claude)."""


def claude_runtime(root: Path, plan: AgentPlan) -> dict[str, str]:
    """The fake claude playing ``plan``'s turns, one process a turn."""
    script = root / "claude-script.json"
    fake_claude.write_script(script, plan.turns)
    executable = root / "claude"
    executable.write_text(f'#!/bin/sh\nexec {sys.executable} {fake_claude.PATH} "$@"\n')
    executable.chmod(0o755)
    return {
        "HIVE_RUNTIME": "claude",
        "HIVE_CLAUDE_COMMAND": str(executable),
        "FAKE_CLAUDE_SCRIPT": str(script),
        "FAKE_CLAUDE_RECORD": str(root / "record.jsonl"),
        "FAKE_CLAUDE_MAX_SECONDS": "120",
        "FAKE_CLAUDE_STDIN_WAIT": "0",
    }


def acp_runtime(root: Path, plan: AgentPlan) -> dict[str, str]:
    """The ACP fixture (the official SDK) playing ``plan``'s turns as claude-agent-acp would: each
    tool call announced with an empty input, its input streamed in parts, then run for real; the
    session's cost reported cumulative in ``usage_update``."""
    script = root / "acp-script.json"
    (root / "acp-state").mkdir()
    acp_agent.write_script(script, [acp_turn(turn) for turn in plan.turns], count_turns="state")
    agent_env = {
        "FAKE_ACP_SCRIPT": str(script),
        "FAKE_ACP_RECORD": str(root / "record.jsonl"),
        "FAKE_ACP_STATE": str(root / "acp-state"),
        "FAKE_ACP_MAX_SECONDS": "600",
    }
    return acp_runtime_env(agent_env)


def acp_turn(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fake claude turn of the plan, as the ACP fixture plays it."""
    played: list[dict[str, Any]] = []
    for step in steps:
        if "mcp_call" in step:
            call = step["mcp_call"]
            name = f"mcp__{call['server']}__{call['tool']}"
            played.append({"claude_tool": {"name": name, "input": call["arguments"], "call": call}})
        elif "text" in step:
            played.append({"text": step["text"]})
        elif "result" in step:
            cost = {"amount": step["result"]["total_cost_usd"], "currency": "USD"}
            played.append({"usage": {"used": 1000, "size": 200_000, "cost": cost}})
    return played


def make_fleet(seed: int, root: Path, *, agents: int = 3) -> Fleet:
    rng = random.Random(seed)
    tag = f"{seed}-{uuid.uuid4().hex[:8]}"
    runs = []
    for index in range(agents):
        agent_root = root / f"r{index}"
        last_acts = agent_root / "last-acts"
        last_acts.mkdir(parents=True)
        plan = agent_plan(rng, index, last_acts, subagents=index == 0)
        env = {
            TAG: tag,
            **(acp_runtime(agent_root, plan) if index == ACP_AGENT else claude_runtime(agent_root, plan)),
        }
        if plan.subagents:
            # Its subagents' turns run on the ACP fixture's default turn (a reply, no tools).
            env["HIVE_ACP_COMMAND"] = sys.executable
            env["HIVE_ACP_ARGS"] = json.dumps([acp_agent.PATH])
        state = root / "agents" / plan.name
        runs.append(AgentRun(index, plan, agent_root, state, env))
    return Fleet(seed, root, runs, tag)


async def run_fleet(seed: int, root: Path, *, seconds: float, faults: bool = True) -> Fleet:
    """Run the fleet of ``seed`` under ``root`` for about ``seconds`` of schedule, let it settle,
    and stop it; what it recorded stays under ``root`` for the checks."""
    fleet = make_fleet(seed, root)
    actions = schedule(random.Random(seed + 1), [a.plan for a in fleet.agents], seconds, faults=faults)
    (root / "agents").mkdir(exist_ok=True)
    fleet.small_disk = small_disk(fleet.agents[fleet.disk_agent].state)
    try:
        async with trio.open_nursery() as starting:
            for agent in fleet.agents:
                starting.start_soon(agent.start)
        async with web_server(fleet):
            async with trio.open_nursery() as observers:
                for action in actions:
                    await trio.sleep(action.delay)
                    await fleet.act(action, observers)
            await settle(fleet)
    except BaseException:
        with trio.CancelScope(shield=True):
            await stop_all(fleet)
        unmount(fleet, keep=True)
        raise
    await stop_all(fleet)
    return fleet


async def stop_all(fleet: Fleet) -> None:
    """SIGINT each harness and wait for it (within `STOP_WITHIN`); how each exited is kept."""
    for agent in fleet.agents:
        with trio.move_on_after(STOP_WITHIN):
            fleet.operated.stops.append((agent.index, await agent.stop()))
        if len(fleet.operated.stops) <= agent.index or fleet.operated.stops[-1][0] != agent.index:
            fleet.operated.stops.append((agent.index, None))


def small_disk(path: Path) -> Path | None:
    """``path`` made a small tmpfs of its own (as root), for the full-disk episodes; None where
    it cannot be (not root), and those episodes are left out. `unmount` undoes it."""
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        return None
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(path)], check=False
    )
    return path if done.returncode == 0 else None


def unmount(fleet: Fleet, *, keep: bool = False) -> None:
    """Undo `small_disk`; ``keep``: its files (but the filler, and what is no regular file) are
    copied onto the directory it was mounted over, for a failed run's files to show them."""
    disk = fleet.small_disk
    if disk is None:
        return
    kept = disk.with_name(f"{disk.name}.kept")
    if keep:
        shutil.copytree(disk, kept, symlinks=True, ignore=_not_kept)
    subprocess.run(["umount", "--lazy", str(disk)], check=False)
    if keep:
        shutil.copytree(kept, disk, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(kept)


def _not_kept(directory: str, names: list[str]) -> list[str]:
    """What a kept small disk leaves out: the filler, and sockets and the like (no copy made)."""
    return [
        name
        for name in names
        if name == "filler"
        or not (os.path.isdir(os.path.join(directory, name)) or os.path.isfile(os.path.join(directory, name)))
    ]


async def settle(fleet: Fleet) -> None:
    """Wait until the fleet has settled: every end told, every message carried, every agent idle.
    A fleet that does not within `SETTLE_WITHIN` fails with what it still owes."""
    from tests.helpers.inotify import watching

    directories = [a.state for a in fleet.agents] + [a.state / "mcp-loose-ends" for a in fleet.agents]
    with (
        trio.move_on_after(SETTLE_WITHIN) as waited,
        watching(*[d for d in directories if d.is_dir()]) as watch,
    ):
        while not await fleet.settled():
            # A state change shows in these directories (a loose end gone, the turn log or the
            # queue written); the recheck also runs at least every second, for the harness's own
            # in-memory state (a turn that starts without a file yet).
            with trio.move_on_after(1):
                await watch.changed()
    if waited.cancelled_caught:
        owed = {
            a.plan.name: sorted(p.name for p in (a.state / "mcp-loose-ends").glob("*.json"))
            for a in fleet.agents
        }
        raise AssertionError(
            f"seed {fleet.seed}: the fleet did not settle within {SETTLE_WITHIN:g} s; owed: {json.dumps(owed)}"
        )


def subagents(agent: AgentRun) -> list[dict[str, Any]]:
    """The agent's subagent sessions, as their daemon keeps them (``subagents/<name>.json``)."""
    found = []
    for path in (agent.state / "subagents").glob("*.json"):
        with suppress(OSError, ValueError):
            found.append(json.loads(path.read_text()))
    return found


def fake_record(agent: AgentRun) -> list[dict[str, Any]]:
    return fake_claude.read_record(agent.record)
