"""``hive-agent`` as a real process: with a bash daemon and a scripted ACP agent (on the official
ACP SDK), and with the fake claude. Every wait is on an event: the harness's READY=1, a line
appearing in a file (inotify), a process's exit (pidfd)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from fixtures import acp_agent
from hive.agent_socket import Compact, Prompt, Wake, open_agent_connection, send_wake
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import (
    GUARD,
    HOLD,
    Agent,
    acp_env,
    claude_env,
    claude_start,
    release,
    running_agent,
    wait_gone,
    wait_line,
)
from tests.helpers.processes import wait_exited

# -- the runtimes ----------------------------------------------------------------------------------


# -- with a bash daemon and an ACP agent ---------------------------------------------------------


async def test_a_background_task_wakes_the_agent_and_its_end_is_the_next_turns_prompt(root: Path) -> None:
    env = acp_env(root, ["default"])
    with trio.fail_after(GUARD):
        async with running_agent(root, env, "--with-bash-daemon") as agent:
            relay = StdioServerParameters(
                command=sys.executable,
                args=["-m", "hive.bash.relay", "--socket", str(agent.state / "bash.sock")],
                env=dict(os.environ),
            )
            loose_end = agent.state / "mcp-loose-ends" / "bash-task-job.json"
            async with stdio_client(relay) as (read, write), ClientSession(read, write) as bash:
                await bash.initialize()
                started = await bash.call_tool(
                    "run", {"cmd": "echo the-task-output", "name": "job", "wait_seconds": 0}
                )
                assert not started.is_error
            record = await agent.hive_line(lambda r: any(c["from"] == "bash-task-job" for c in r["carried"]))
            await wait_gone(loose_end)
            status_reply = await _status(agent)
    assert agent.process.returncode == 0, agent.stderr()
    assert record["outcome"] == "completed" and record["delivered"]
    prompts = [e for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == "prompt"]
    assert len(prompts) == 1
    assert prompts[0]["text"].startswith("[wake from bash-task-job]\nbash task job ended: done, exit code 0")
    assert "the-task-output" in prompts[0]["text"]
    # The agent got the bash relay and the hyperhive tools' relay, both stdio servers.
    new = next(e for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == "new_session")
    servers = {s["name"]: s for s in new["mcpServers"]}
    assert set(servers) == {"bash", "hyperhive"}
    assert "--socket" in servers["bash"]["args"]
    assert servers["hyperhive"]["args"][-2:] == ["--socket", str(agent.state / "hyperhive.sock")]
    assert "url" not in servers["hyperhive"]
    assert status_reply.session_id == new_session_id(root)
    assert not (agent.state / "agent.sock").exists() and not (agent.state / "bash.sock").exists()
    assert not (agent.state / "hyperhive.sock").exists()
    assert "no hive-bash-daemon answers" not in agent.stderr()


def new_session_id(root: Path) -> str:
    created = [e for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == "session_created"]
    return str(created[0]["sessionId"])


async def _status(agent: Agent) -> Any:
    async with open_agent_connection(agent.socket) as conn:
        return await conn.status()


async def test_an_acp_agent_without_http_mcp_is_refused_before_anything_is_served_if_a_server_is_http(
    root: Path,
) -> None:
    env = acp_env(root, ["default"])
    script = json.loads((root / "acp-script.json").read_text())
    script["capabilities"] = {"mcpCapabilities": {"sse": False}}
    (root / "acp-script.json").write_text(json.dumps(script))
    config = root / "mcp.json"
    config.write_text('{"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}')
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "hive.agent.harness",
                "--state-dir",
                str(root / "state"),
                "--mcp-config",
                str(config),
            ],
            env={**os.environ, **env},
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2
    assert b"mcpCapabilities.http), and the MCP config names web over HTTP" in done.stderr
    assert not (root / "state" / "agent.sock").exists()
    assert not (root / "state" / "hyperhive.sock").exists()


async def test_a_missing_claude_exits_2_at_start_as_a_missing_acp_agent_does(root: Path) -> None:
    # Issue 20, item 18: not found at each turn and retried forever, but at start, saying why.
    for env, says in (
        ({"HIVE_RUNTIME": "claude", "HIVE_CLAUDE_COMMAND": "/nonexistent/claude"}, b"/nonexistent/claude"),
        ({"HIVE_RUNTIME": "acp", "HIVE_ACP_COMMAND": "/nonexistent/acp-agent"}, b"/nonexistent/acp-agent"),
    ):
        with trio.fail_after(GUARD):
            done = await trio.run_process(
                [sys.executable, "-m", "hive.agent.harness", "--state-dir", str(root / "state")],
                env={**os.environ, **env},
                capture_stderr=True,
                check=False,
            )
        assert done.returncode == 2, done.stderr
        assert b"no such executable" in done.stderr and says in done.stderr
        assert not (root / "state" / "agent.sock").exists()


async def test_a_signal_while_the_agent_starts_stops_it_with_sigint_and_exits_0(root: Path) -> None:
    env = acp_env(root, ["default"])
    script = json.loads((root / "acp-script.json").read_text())
    script["hang"] = ["initialize"]
    (root / "acp-script.json").write_text(json.dumps(script))
    with trio.fail_after(GUARD), open(root / "agent.err", "wb") as err:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "hive.agent.harness", "--state-dir", str(root / "state")],
            env={**os.environ, **env},
            stderr=err,
        )
        hung = await wait_line(root / "acp-record.jsonl", lambda e: e["event"] == "hang")
        process.send_signal(signal.SIGTERM)
        assert await process.wait() == 0, (root / "agent.err").read_text()
        await wait_exited(hung["pid"])
    signals = [
        e["signal"] for e in acp_agent.read_record(root / "acp-record.jsonl") if e["event"] == "signal"
    ]
    assert signals == ["SIGINT"]
    assert not (root / "state" / "agent.sock").exists()


# -- with the fake claude ---------------------------------------------------------------------------


async def test_claude_gets_bash_and_hyperhive_and_no_builtin_bash(root: Path, fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-x", "x ended"))
            start = await claude_start(fake, 1)
            await agent.carried_line()  # the turn is over, not only in the log: the stop finds it idle
    options = start["options"]
    (mcp_file,) = options["mcp_config"]
    assert Path(mcp_file) == root / "state" / "claude-mcp.json"
    assert os.stat(mcp_file).st_mode & 0o777 == 0o600
    config = json.loads(Path(mcp_file).read_text())["mcpServers"]
    assert not any("x ended" in arg for arg in start["argv"])
    assert set(config) == {"bash", "hyperhive"}
    assert config["bash"]["type"] == "stdio"
    assert config["hyperhive"]["type"] == "stdio"
    assert config["hyperhive"]["args"][-2:] == ["--socket", str(root / "state" / "hyperhive.sock")]
    assert options["disallowed_tools"] == ["Bash"]
    assert set(options["allowed_tools"][0].split(",")) == {"mcp__bash", "mcp__hyperhive"}
    assert start["prompt"] == "[wake from bash-task-x]\nx ended"
    # No bash daemon was started for it: said at start. Stopped idle: no turn to stop is named.
    log = agent.stderr()
    assert f"no hive-bash-daemon answers on {agent.state / 'bash.sock'}" in log
    assert "SIGINT: stopping\n" in log and "turn gets SIGINT" not in log


async def test_a_300_kb_message_reaches_claude_whole(root: Path, fake: FakeClaude) -> None:
    # Issue 20, item 12: the prompt goes to claude's stdin, so the 100 KB cut (for Linux's
    # 128 KiB limit on one argument) is gone.
    fake.script([{"default_turn": True}])
    text = "the first words " + "m" * 300_000 + " the last words"
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            async with open_agent_connection(agent.socket) as conn:
                assert (await conn.request(Prompt(text))).ok
            start = await claude_start(fake, 1)
            await agent.hive_line()
    assert start["prompt"] == f"[message from operator]\n{text}"
    assert not any("the first words" in arg for arg in start["argv"])


async def test_what_arrives_during_a_turn_is_carried_by_the_next_in_order(
    root: Path, fake: FakeClaude
) -> None:
    fake.script(HOLD, [{"default_turn": True}])
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-first", "1"))
            first = await claude_start(fake, 1)
            async with open_agent_connection(agent.socket) as conn:
                await conn.wake(Wake("bash-task-a", "a", end_id="a:1"))
                assert (await conn.request(Prompt("look at b"))).ok
                await conn.wake(Wake("bash-task-a", "a", end_id="a:1"))  # a repeat: dropped
                await conn.wake(Wake("bash-task-c", "c"))
                status = await conn.status()
            assert (status.state, status.queue, status.carrying) == ("turn", 3, 1)
            await release(fake, first)
            second = await claude_start(fake, 2)
            await agent.hive_line(lambda r: r["turn"] == 2)
    assert (
        second["prompt"]
        == "[wake from bash-task-a]\na\n\n[message from operator]\nlook at b\n\n[wake from bash-task-c]\nc"
    )
    assert [[c["from"] for c in r["carried"]] for r in agent.hive_lines()] == [
        ["bash-task-first"],
        ["bash-task-a", "operator", "bash-task-c"],
    ]
    assert f"--resume={first['session_id']}" in second["args"]


async def test_the_operators_compact_and_the_agents_compact_tool_reach_the_runtime(
    root: Path, fake: FakeClaude
) -> None:
    fake.script([{"default_turn": True}], [{"default_turn": True}], HOLD, [{"default_turn": True}])
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-a", "1"))
            await agent.hive_line(lambda r: r["turn"] == 1)
            async with open_agent_connection(agent.socket) as conn:
                assert (await conn.request(Compact())).ok
            compacted = await claude_start(fake, 2)
            assert compacted["prompt"] == "/compact"
            await agent.hive_line(lambda r: r["kind"] == "compact")
            # The agent's compact tool, called during its turn through the relay it was given.
            await send_wake(agent.socket, Wake("bash-task-b", "2"))
            held = await claude_start(fake, 3)
            given = json.loads(Path(held["options"]["mcp_config"][0]).read_text())["mcpServers"]["hyperhive"]
            relay = StdioServerParameters(command=given["command"], args=given["args"], env=dict(os.environ))
            async with stdio_client(relay) as (read, write), ClientSession(read, write) as tools:
                await tools.initialize()
                answer = await tools.call_tool("compact", {})
                assert not answer.is_error
            assert (await _status(agent)).compact_pending
            await release(fake, held)
            after = await claude_start(fake, 4)
            assert after["prompt"] == "/compact"
            await agent.hive_line(lambda r: r["kind"] == "compact" and r["requested_by"] == "agent")
    kinds = [(r["kind"], r.get("requested_by")) for r in agent.hive_lines()]
    assert kinds == [("turn", None), ("compact", "operator"), ("turn", None), ("compact", "agent")]


async def test_sigterm_during_a_turn_sends_the_agent_only_sigint_exits_0_and_a_restart_resumes(
    root: Path, fake: FakeClaude
) -> None:
    held = [{"init": {}}, {"text": "working"}, {"wait_for_signal": "SIGUSR1"}, {"result": {}}]
    fake.script(held, [{"default_turn": True}], on_signal={"SIGINT": "interrupt_stream"})
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-a", "1"))
            first = await claude_start(fake, 1)
            await wait_line(agent.state / "turns.jsonl", lambda o: o.get("type") == "assistant")
            agent.process.send_signal(signal.SIGTERM)
            assert await agent.process.wait() == 0, agent.stderr()
        await wait_exited(first["pid"])
        assert fake.signals() == ["SIGINT"]
        stopped = agent.hive_lines()[-1]
        assert (stopped["outcome"], stopped["delivered"]) == ("stopped", True), json.dumps(stopped)
        assert "SIGTERM: stopping; the running turn gets SIGINT" in agent.stderr()
        assert not agent.socket.exists()
        async with running_agent(root, claude_env(fake)) as again:
            await send_wake(again.socket, Wake("bash-task-b", "2"))
            second = await claude_start(fake, 2)
            await again.hive_line(lambda r: r["turn"] == 2)  # numbered on from the last run's
    assert f"--resume={first['session_id']}" in second["args"]
    assert second["prompt"] == "[wake from bash-task-b]\n2"  # the stopped turn's wake is not carried twice


async def test_sigkill_with_wakes_and_a_compaction_queued_loses_none_after_a_restart(
    root: Path, fake: FakeClaude
) -> None:
    done = [{"default_turn": True}]
    fake.script(done, HOLD, done, done)
    with trio.fail_after(GUARD):
        async with running_agent(root, claude_env(fake)) as agent:
            await send_wake(agent.socket, Wake("bash-task-zero", "-"))
            await agent.hive_line(lambda r: r["turn"] == 1)  # a session to compact
            await send_wake(agent.socket, Wake("bash-task-first", "0"))
            first = await claude_start(fake, 2)
            for n in range(1, 4):
                await send_wake(agent.socket, Wake(f"bash-task-{n}", str(n), end_id=f"{n}:s"))
            async with open_agent_connection(agent.socket) as conn:
                assert (await conn.request(Compact())).ok
            agent.process.kill()  # the crash is the point
            await agent.process.wait()
        await wait_exited(first["pid"])  # the killed harness's fake claude, sent SIGINT by the kernel
        async with running_agent(root, claude_env(fake)) as again:
            # The compaction acknowledged before the crash runs first, then the turn.
            compacted = await claude_start(fake, 3)
            second = await claude_start(fake, 4)
            await again.hive_line(lambda r: r["turn"] == 3)
            # A repeat of an end the crashed harness had acknowledged is still dropped.
            await send_wake(again.socket, Wake("bash-task-2", "2", end_id="2:s"))
            assert (await _status(again)).queue == 0
    assert compacted["prompt"] == "/compact"
    assert f"--resume={first['session_id']}" in compacted["args"]
    assert second["prompt"] == "[wake from bash-task-first]\n0\n\n" + "\n\n".join(
        f"[wake from bash-task-{n}]\n{n}" for n in (1, 2, 3)
    )
    lines = again.hive_lines()
    assert [(r["kind"], r.get("requested_by")) for r in lines] == [
        ("turn", None),
        ("compact", "operator"),
        ("turn", None),
    ]
    assert [c["from"] for c in lines[2]["carried"]] == [
        "bash-task-first",
        "bash-task-1",
        "bash-task-2",
        "bash-task-3",
    ]
