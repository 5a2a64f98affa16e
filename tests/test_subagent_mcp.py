"""``hive-subagent-mcp`` through the real ``mcp`` client over stdio, its daemon started on first use."""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from tests.helpers.jsonrpc import initialize, notification, request
from tests.helpers.listener import AgentListener
from tests.helpers.results import call, structured, text_of
from tests.helpers.subagents import (
    INTERRUPTED_IN_BASH,
    World,
    daemon_pid,
    mcp_session,
    wait_until,
)

TURN = 90


def session_of(result: Any) -> dict[str, Any]:
    return structured(result)["subagent"]


async def test_two_subagents_one_interrupted_the_other_continued_and_the_wakes(world: World) -> None:
    world.claude.script(INTERRUPTED_IN_BASH)
    world.acp.script("default")
    agent = AgentListener(world.agent_socket)
    with trio.fail_after(TURN):
        async with agent.serving(), mcp_session(world) as session:
            listed = await session.list_tools()
            assert sorted(t.name for t in listed.tools) == ["continue", "interrupt", "start", "status"]

            started = await call(session, "start", name="a", prompt="run the tool", runtime="claude")
            assert not started.is_error, text_of(started)
            assert structured(started)["wake"] == "subagent-a"
            started = await call(session, "start", name="b", prompt="hello", runtime="acp")
            assert not started.is_error, text_of(started)
            assert daemon_pid(world.state) is not None  # the first call started the daemon

            # b's first turn, waited for: its end comes in the answer, and the harness gets it
            # marked shown (it settles it by the turn it was shown in), not as a wake to carry.
            waited = await call(session, "status", name="b", wait_seconds=30)
            (b,) = structured(waited)["subagents"]
            assert b["slot"] is None and b["last_turn"]["stop_reason"] == "completed"
            assert b["last_turn"]["result"] == "fake acp agent reply to: hello"

            # a, interrupted mid-tool; `force` is still accepted, and ignored.
            await wait_until(world, lambda: any("tool_use" in str(line) for line in world.log("a")))
            interrupted = await call(session, "interrupt", name="a", force=True)
            assert not interrupted.is_error, text_of(interrupted)
            assert structured(interrupted)["sent"] == "SIGINT"
            assert "force is ignored" in text_of(interrupted)

            continued = await call(session, "continue", name="b", prompt="again")
            assert not continued.is_error, text_of(continued)
            assert session_of(continued)["slot"] in ("starting", "running")

            wakes = await agent.wait_for(3)
            status = await call(session, "status")
    assert world.claude.signals() == ["SIGINT"]
    (shown,) = [wake for wake in wakes if wake.shown_at is not None]
    assert shown.sender == "subagent-b" and "ended turn 1 (completed)" in shown.body
    by_sender = {wake.sender: wake for wake in wakes if wake.shown_at is None}
    assert sorted(by_sender) == ["subagent-a", "subagent-b"]
    assert "ended turn 1 (interrupted" in by_sender["subagent-a"].body
    assert "ended turn 2 (completed)" in by_sender["subagent-b"].body
    assert "fake acp agent reply to: again" in by_sender["subagent-b"].body
    assert all(wake.end_id and wake.end_id.startswith(wake.sender + ":") for wake in wakes)
    a, b = structured(status)["subagents"]
    assert (a["name"], a["slot"], a["last_turn"]["stop_reason"]) == ("a", None, "interrupted")
    assert (b["name"], b["slot"], b["turns"], b["last_turn"]["stop_reason"]) == ("b", None, 2, "completed")
    assert b["session_id"] is not None
    text = text_of(status)
    assert "a: idle (claude" in text and "b: idle (acp" in text


async def test_tool_errors_say_what_to_do(world: World) -> None:
    world.claude.script([{"init": {}}, {"wait_for_signal": "SIGINT"}, {"interrupted": "stream"}])
    with trio.fail_after(TURN):
        async with mcp_session(world) as session:
            bad = await call(session, "start", name="no spaces", prompt="x")
            unknown = await call(session, "continue", name="ghost", prompt="x")
            wrong_runtime = await call(session, "start", name="r", prompt="x", runtime="gpt")
            extra = await call(session, "status", name="x", colour="blue")
            idle = await call(session, "status")
            await call(session, "start", name="busy", prompt="wait")
            busy = await call(session, "continue", name="busy", prompt="more")
            await call(session, "interrupt", name="busy")
    assert bad.is_error and structured(bad)["error"] == "BadArgument" and "letters, digits" in text_of(bad)
    assert unknown.is_error and structured(unknown)["error"] == "UnknownSubagent"
    assert "start it first" in text_of(unknown)
    assert wrong_runtime.is_error and "'claude' or 'acp'" in text_of(wrong_runtime)
    assert extra.is_error and "1 unknown argument: colour" in text_of(extra)
    assert not idle.is_error and "no subagents yet" in text_of(idle)
    assert busy.is_error and structured(busy)["error"] == "NameBusy" and "interrupt it" in text_of(busy)


async def test_arguments_that_are_not_an_object_are_a_tool_error_saying_so(world: World) -> None:
    """Through hive-subagent-mcp in raw JSON-RPC lines: the daemon (started on first use) says what
    was wrong, and the session goes on."""
    argv = [sys.executable, "-m", "hive.subagent.relay", "--state-dir", str(world.state)]
    calls = [request(2, "tools/call", {"name": "status", "arguments": "a"}), request(3, "ping")]
    lines = [initialize(1), notification("notifications/initialized"), *calls]
    with trio.fail_after(TURN):
        ended = await trio.run_process(
            argv,
            stdin=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
            capture_stdout=True,
            env=world.env(),
        )
    answers = {answer["id"]: answer for answer in map(json.loads, ended.stdout.splitlines())}
    text = (
        "arguments must be an object naming each argument, not a string; this tool takes name, wait_seconds"
    )
    assert answers[2]["result"] == {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"error": "BadArgument", "message": text},
        "isError": True,
    }
    assert answers[3]["result"] == {}  # the session went on


async def test_two_relays_racing_a_cold_start_start_one_daemon_and_both_reach_it(world: World) -> None:
    """Two hive-subagent-mcp at once on a state directory with no daemon: one starts the daemon,
    holding the starting lock until it serves; the other waits on that lock and connects. Both
    are answered by the daemon, and no second daemon was started (to find the directory taken)."""
    argv = [sys.executable, "-m", "hive.subagent.relay", "--state-dir", str(world.state)]
    lines = [
        initialize(1),
        notification("notifications/initialized"),
        request(2, "tools/call", {"name": "status"}),
    ]
    stdin = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    answers: list[dict[str, Any]] = []

    async def relay() -> None:
        ended = await trio.run_process(argv, stdin=stdin, capture_stdout=True, env=world.env())
        answers.extend(answer for answer in map(json.loads, ended.stdout.splitlines()) if answer["id"] == 2)

    with trio.fail_after(TURN):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay)
            nursery.start_soon(relay)
    assert [answer["result"].get("isError", False) for answer in answers] == [False, False], answers
    assert all("no subagents yet" in answer["result"]["content"][0]["text"] for answer in answers)
    assert daemon_pid(world.state) is not None
    log = (world.state / "subagent-daemon.log").read_text()
    assert "another subagent daemon is using" not in log, log
