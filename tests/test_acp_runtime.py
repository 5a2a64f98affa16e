"""The ACP backend against an agent written with the official ACP SDK: every seed sentence, the
conformance cases of CLIENTS.md, and what hive sends checked against the SDK's own models."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import acp.schema as sdk
import pytest
import trio
import trio.testing

from hive.acp import _link, _runtime
from hive.runtime import (
    SIGNALS_SENT,
    AgentGroup,
    AgentRefused,
    CompactionPolicy,
    HttpServer,
    IdleKilled,
    IdleTimeout,
    Permission,
    Progress,
    SessionNotFound,
    StdioServer,
    StopReason,
)
from hive.sink import MemorySink
from tests.helpers.acp_fake import EFFORT, MODEL, FakeAcp
from tests.helpers.gates import sink_lines
from tests.helpers.inotify import wait_until
from tests.helpers.processes import wait_exited
from tests.helpers.runtimes import run_and_cancel

GUARD = 60


@pytest.fixture
def agent(short_tmp: Path) -> Iterator[FakeAcp]:
    fake = FakeAcp(short_tmp)
    try:
        yield fake
    finally:
        fake.cleanup()


def session_answers(agent: FakeAcp) -> list[dict[str, Any]]:
    """The answers to session/new the agent has written to its stdout."""
    sent = [e["message"] for e in agent.events("out")]
    return [m for m in sent if "sessionId" in (m.get("result") or {})]


def result_of(sink: MemorySink) -> dict[str, Any]:
    (result,) = [line for line in sink_lines(sink) if line["type"] == "result"]
    return result


# -- a turn, in claude's shape ------------------------------------------------------------------


async def test_a_turn_reads_like_a_claude_turn(agent: FakeAcp) -> None:
    agent.script(
        [
            {"thought": "Let me "},
            {"thought": "think."},
            {"text": "I will "},
            {"text": "run it."},
            {
                "tool_call": {
                    "toolCallId": "t1",
                    "title": "run: ls",
                    "kind": "execute",
                    "status": "pending",
                    "rawInput": {"cmd": "ls"},
                    "_meta": {"claudeCode": {"toolName": "mcp__bash__run"}},
                }
            },
            {"tool_update": {"toolCallId": "t1", "status": "in_progress"}},
            {
                "tool_update": {
                    "toolCallId": "t1",
                    "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": "a.txt"}}],
                }
            },
            {"usage": {"used": 1500, "size": 200000, "cost": {"amount": 0.01, "currency": "USD"}}},
            {"text": "Done."},
            {"stop": "end_turn"},
        ]
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await runtime.run("list the files", sink)
    kinds = [(line["type"], line.get("subtype")) for line in sink_lines(sink)]
    assert kinds == [
        ("system", "init"),
        ("assistant", None),
        ("assistant", None),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
        ("result", "success"),
    ]
    init, thinking, text, tool_use, tool_result, done, result = sink_lines(sink)
    assert init["session_id"] == outcome.session_id and init["agent"]["name"] == "fake-acp-agent"
    assert thinking["message"]["content"] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": ""}
    ]
    assert text["message"]["content"][0]["text"] == "I will run it."
    block = tool_use["message"]["content"][0]
    assert (block["type"], block["id"], block["name"], block["input"]) == (
        "tool_use",
        "t1",
        "mcp__bash__run",
        {"cmd": "ls"},
    )
    assert tool_result["message"]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "a.txt",
        "is_error": False,
    }
    assert done["message"]["id"] != text["message"]["id"]  # a new API message after a tool result
    assert (result["result"], result["is_error"], result["stop_reason"]) == ("Done.", False, "end_turn")
    assert result["modelUsage"]["agent"]["contextWindow"] == 200000
    assert result["total_cost_usd"] == 0.01
    assert sink.usages[-1].used == 1500 and sink.usages[-1].size == 200000
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (
        StopReason.COMPLETED,
        False,
        False,
    )
    assert outcome.usage is not None and outcome.usage.used == 1500


async def test_an_init_per_session_and_a_result_per_turn(agent: FakeAcp) -> None:
    agent.script()
    first, second = MemorySink(), MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            await runtime.run("one", first)
            await runtime.run("two", second)
    assert [line["type"] for line in sink_lines(first)] == ["system", "assistant", "result"]
    assert [line["type"] for line in sink_lines(second)] == ["assistant", "result"]
    assert sink_lines(second)[0]["message"]["content"][0]["text"] == "fake acp agent reply to: two"


# -- initialize and sessions --------------------------------------------------------------------


async def test_an_agent_without_mcp_over_http_is_refused_at_startup_only_if_a_server_is_http(
    agent: FakeAcp,
) -> None:
    agent.script(capabilities={"mcpCapabilities": {"sse": True}})
    web = HttpServer(name="web", url="http://127.0.0.1:9/mcp")
    with (
        trio.fail_after(GUARD),
        pytest.raises(AgentRefused, match=r"mcpCapabilities\.http.*names web over HTTP"),
    ):
        async with agent.runtime(mcp_servers=(StdioServer(name="bash", command="b"), web)):
            pass
    assert agent.signals() == ["SIGINT"]  # and it was stopped the SIGINT way
    # hive's own servers are stdio: with no HTTP server, such an agent serves.
    with trio.fail_after(GUARD):
        async with agent.runtime(mcp_servers=(StdioServer(name="bash", command="b"),)) as runtime:
            await runtime.run("hi", MemorySink())


async def test_session_new_hands_the_agent_hives_mcp_servers(agent: FakeAcp) -> None:
    agent.script()
    servers = (
        StdioServer(
            name="bash", command="/usr/bin/hive-bash-mcp", args=("--socket", "/run/b.sock"), env=(("A", "1"),)
        ),
        HttpServer(name="hyperhive", url="http://127.0.0.1:9/mcp", headers=(("Authorization", "Bearer t"),)),
    )
    with trio.fail_after(GUARD):
        async with agent.runtime(mcp_servers=servers) as runtime:
            await runtime.run("hi", MemorySink())
    (created,) = agent.events("new_session")
    assert created["cwd"] == str(agent.root)
    assert created["mcpServers"] == [
        {
            "name": "bash",
            "command": "/usr/bin/hive-bash-mcp",
            "args": ["--socket", "/run/b.sock"],
            "env": [{"name": "A", "value": "1"}],
        },
        {
            "type": "http",
            "name": "hyperhive",
            "url": "http://127.0.0.1:9/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t"}],
        },
    ]


async def test_load_session_picks_the_session_up_after_a_restart(agent: FakeAcp) -> None:
    agent.script([{"text": "first answer"}], "default", count_turns="state")
    replayed = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            await runtime.run("remember me", MemorySink())
            session = runtime.session_id
        async with agent.runtime(session_id=session) as again:
            outcome = await again.run("still there?", replayed)
    assert outcome.session_id == session
    (load,) = agent.events("load_session")
    assert load["sessionId"] == session and load["replayed"] > 0
    # The replayed history is not this turn's output.
    assert "first answer" not in json.dumps(sink_lines(replayed))
    assert [line["type"] for line in sink_lines(replayed)] == ["system", "assistant", "result"]


async def test_without_load_session_a_restart_starts_a_new_session_and_says_so(
    agent: FakeAcp, caplog: pytest.LogCaptureFixture
) -> None:
    agent.script(capabilities={"loadSession": False})
    with trio.fail_after(GUARD):
        async with agent.runtime(session_id="sess_from_before") as runtime:
            outcome = await runtime.run("hi", MemorySink())
    assert outcome.session_id != "sess_from_before"
    assert agent.events("load_session") == []
    assert "cannot load sessions" in caplog.text


# -- permission ---------------------------------------------------------------------------------


async def test_permission_is_answered_by_the_policy(agent: FakeAcp) -> None:
    options = [
        {"optionId": "yes-once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "yes-always", "name": "Always", "kind": "allow_always"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ]
    agent.script([{"permission": {"toolCall": {"toolCallId": "t1", "title": "rm x"}, "options": options}}])
    with trio.fail_after(GUARD):
        for permission in Permission:
            async with agent.runtime(permission=permission) as runtime:
                await runtime.run("go", MemorySink())
    chosen = [e["answer"]["result"]["outcome"]["optionId"] for e in agent.events("permission")]
    # default and accept_edits refuse a tool call that is no edit; allow allows it once.
    assert chosen == ["no", "no", "yes-once"]


# -- stopping -----------------------------------------------------------------------------------


# A thought then text: the thought block is written once the text starts, so the turn is
# known to be under way when the sink holds the init and the thought.
WORKING = [{"thought": "hmm"}, {"text": "working"}, {"sleep": 30}]


async def test_cancel_sends_session_cancel_and_the_turn_ends_cancelled(agent: FakeAcp) -> None:
    agent.script(WORKING, "default")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
            after = await runtime.run("next", MemorySink())
            assert agent.signals() == []  # a cancel is no signal
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (StopReason.CANCELLED, True, False)
    result = result_of(sink)
    assert (result["subtype"], result["terminal_reason"]) == ("error_during_execution", "aborted_streaming")
    assert len(agent.inbound("session/cancel")) == 1
    assert agent.signals() == ["SIGINT"]  # when the runtime closed
    assert after.stop_reason is StopReason.COMPLETED


@pytest.mark.parametrize(
    "on_cancel",
    [
        {
            "late": 0.5,
            "updates": [{"text": "late words"}, {"tool_update": {"toolCallId": "t9", "status": "failed"}}],
        },
        "end_turn",
        {"error": -32603, "data": {"details": "This operation was aborted"}},
        {"error": -32800},
    ],
)
async def test_a_cancel_answered_late_or_wrongly_is_still_cancelled(
    agent: FakeAcp, on_cancel: object
) -> None:
    agent.script(WORKING, "default", on_cancel=on_cancel)
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
            after = await runtime.run("next", MemorySink())
            assert agent.signals() == []
    assert (outcome.stop_reason, outcome.is_error) == (StopReason.CANCELLED, True)
    assert result_of(sink)["errors"] == ["the turn was cancelled"]
    assert after.stop_reason is StopReason.COMPLETED  # the session stays usable


async def test_a_tool_whose_updates_were_on_their_way_when_the_cancel_went_out_makes_it_aborted_tools(
    agent: FakeAcp,
) -> None:
    """The cancel goes out before the call's updates are read (a loaded machine, a busy pipe):
    the call was under way when the stop began, and the result says so, as claude's does."""
    late_tool = [
        {"tool_call": {"toolCallId": "t1", "title": "cat gate", "kind": "execute", "status": "in_progress"}},
        {"tool_update": {"toolCallId": "t1", "status": "failed"}},
    ]
    agent.script(WORKING, "default", on_cancel={"late": 0.1, "updates": late_tool})
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
    assert outcome.stop_reason is StopReason.CANCELLED
    assert result_of(sink)["terminal_reason"] == "aborted_tools"


async def test_an_agent_that_never_answers_the_cancel_gets_sigint_and_the_next_turn_respawns_it(
    agent: FakeAcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent.script(WORKING, "default", on_cancel="never", count_turns="state")
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with agent.runtime(cancel_grace=0.5) as runtime:
            outcome = await run_and_cancel(runtime, sink)
            first_pid = agent.pids()[0]
            session = runtime.session_id
            after = await runtime.run("next", MemorySink())
    assert (outcome.stop_reason, outcome.synthesized) == (StopReason.CANCELLED, True)
    assert "sent SIGINT" in result_of(sink)["errors"][0]
    assert after.stop_reason is StopReason.COMPLETED and after.session_id == session
    assert len(agent.pids()) == 2 and agent.pids()[0] == first_pid
    assert [e["pid"] for e in agent.events("load_session")] == [agent.pids()[1]]
    signals = [(e["pid"], e["signal"]) for e in agent.events("signal")]
    assert (first_pid, "SIGINT") in signals and all(sig == "SIGINT" for _, sig in signals)
    assert {s.signal for s in SIGNALS_SENT[sent_before:]} == {"SIGINT"}


async def test_an_agent_that_ignores_sigint_keeps_running_and_a_new_one_starts_beside_it(
    agent: FakeAcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent.script(WORKING, "default", on_cancel="never", on_signal={"SIGINT": "ignore"}, count_turns="state")
    with trio.fail_after(GUARD):
        async with agent.runtime(cancel_grace=0.3, stop_grace=0.3, close_grace=0.3) as runtime:
            await run_and_cancel(runtime, MemorySink())
            after = await runtime.run("next", MemorySink())
            old, _ = agent.pids()
            assert Path(f"/proc/{old}").exists()  # still running, never killed
    assert after.stop_reason is StopReason.COMPLETED
    assert set(agent.signals()) == {"SIGINT"}


async def test_the_idle_watchdog_cancels_and_fails_the_turn_with_idle_timeout(agent: FakeAcp) -> None:
    agent.script([{"text": "one word"}, {"silent": True}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime(idle_timeout=0.5) as runtime:
            with pytest.raises(IdleTimeout) as caught:
                await runtime.run("go", sink)
            assert agent.signals() == []
    assert not isinstance(caught.value, IdleKilled)
    assert len(agent.inbound("session/cancel")) == 1
    assert result_of(sink)["subtype"] == "error_during_execution"


async def test_an_idle_agent_that_ignores_the_cancel_fails_the_turn_with_idle_killed(
    agent: FakeAcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent.script([{"silent": True}], on_cancel="never")
    with trio.fail_after(GUARD):
        async with agent.runtime(idle_timeout=0.3, cancel_grace=0.3) as runtime:
            with pytest.raises(IdleKilled, match="sent SIGINT"):
                await runtime.run("go", MemorySink())
    assert agent.signals() == ["SIGINT"]


async def test_a_crash_mid_turn_ends_the_turn_with_its_status_and_stderr(agent: FakeAcp) -> None:
    agent.script(
        [{"text": "one chunk"}, {"crash": 3, "stderr": "fatal: out of cheese"}],
        "default",
        count_turns="state",
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            with trio.fail_after(10):
                outcome = await runtime.run("go", sink)
            after = await runtime.run("again", MemorySink())
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (StopReason.EXITED, True, True)
    error = result_of(sink)["errors"][0]
    assert "exited with status 3" in error and "out of cheese" in error
    assert after.stop_reason is StopReason.COMPLETED  # a new agent took over
    assert len(agent.pids()) == 2


async def test_dropping_the_runtime_sends_the_group_sigint(agent: FakeAcp) -> None:
    agent.script([{"spawn": "exec sleep 300"}, {"text": "hi"}])
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            await runtime.run("go", MemorySink())
        (spawned,) = agent.events("spawned")
        await wait_exited(spawned["pid"])  # the group's SIGINT reached the agent's own child
        await wait_exited(agent.pids()[0])
    assert agent.signals() == ["SIGINT"]


async def test_the_task_reading_an_agent_ends_when_the_agent_has_gone(agent: FakeAcp) -> None:
    """An agent that exits leaves nothing in the caller's nursery: it closes on its own."""
    agent.script()

    async def unanswered(method: str, params: Any) -> Any:
        raise AssertionError(method)

    async def ignored(method: str, params: Any) -> None:
        pass

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            link = await _link.open_link(
                agent.spec(),
                agent.config(),
                nursery,
                AgentGroup(),
                Progress(),
                on_request=unanswered,
                on_notification=ignored,
            )
            link.process.interrupt()
    assert link.process.returncode is not None


# -- tolerance ----------------------------------------------------------------------------------


async def test_odd_but_legal_traffic_is_tolerated(agent: FakeAcp) -> None:
    agent.script(
        [
            {"tool_update": {"toolCallId": "t9", "status": "in_progress"}},
            {"tool_call": {"toolCallId": "t9", "title": "Read a.py", "kind": "read"}},
            {"tool_update": {"toolCallId": "t9", "status": "completed", "rawOutput": {"lines": 3}}},
            {"raw_update": {"sessionUpdate": "compaction_update", "x": 1}},
            {"raw_update": {"sessionUpdate": "_acme_thing"}},
            {
                "raw_update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "odd"},
                    "extra": 1,
                    "_meta": {"a": 1},
                }
            },
            # Requests hive does not serve; the agent waits for each answer.
            {"request": {"method": "terminal/create", "params": {"command": "ls"}, "id": 5}},
            {"request": {"method": "elicitation/create", "params": {}, "id": "e1"}},
            {"request": {"method": "_acme/ping", "params": {}, "id": 7}},
            {"stop": "end_turn", "usage": {"totalTokens": 10, "inputTokens": 7, "outputTokens": 3}},
        ],
        commands=[{"name": "compact", "description": "compact"}],
        commands_before_response=True,
        session_result_extra={"models": {"currentModelId": "x", "availableModels": []}},
        updates_after_result=[{"sessionUpdate": "usage_update", "used": 5, "size": 10}],
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await runtime.run("go", sink)
            assert runtime.commands == ["compact"]  # sent before session/new answered, still taken
    assert outcome.stop_reason is StopReason.COMPLETED
    tool_uses = [
        line
        for line in sink_lines(sink)
        if line["type"] == "assistant" and line["message"]["content"][0]["type"] == "tool_use"
    ]
    assert [u["message"]["content"][0]["id"] for u in tool_uses] == ["t9"]
    results = [line for line in sink_lines(sink) if line["type"] == "user"]
    assert json.loads(results[0]["message"]["content"][0]["content"]) == {"lines": 3}
    assert result_of(sink)["usage"]["input_tokens"] == 7
    answers = {e["id"]: e for e in agent.events("response") if e.get("id") in (5, "e1", 7)}
    assert {request_id: answer["error"]["code"] for request_id, answer in answers.items()} == {
        5: -32601,
        "e1": -32601,
        7: -32601,
    }
    assert agent.events("bad_line") == []


# -- model, effort, choices ---------------------------------------------------------------------


OPTIONS = [MODEL, EFFORT]


async def test_model_then_effort_are_set_only_when_offered_and_not_held(agent: FakeAcp) -> None:
    agent.script("default", config_options=OPTIONS)
    with trio.fail_after(GUARD):
        async with agent.runtime(model="m2", effort="high") as runtime:
            assert runtime.choices().models() == ()  # no session yet
            await runtime.run("one", MemorySink())
            await runtime.run("two", MemorySink())  # already held: nothing sent
            assert runtime.choices().models() == ("m1", "m2")
            assert runtime.choices().efforts() == ("low", "high")
        async with agent.runtime(model="haiku", effort="max") as runtime:
            await runtime.run("three", MemorySink())  # not offered: nothing sent
    sets = [(e["configId"], e["value"]) for e in agent.events("set_config_option")]
    assert sets == [("model", "m2"), ("effort", "high")]


async def test_choices_follow_config_option_updates(agent: FakeAcp) -> None:
    changed = [dict(OPTIONS[0], options=[{"value": "m3", "name": "New"}], currentValue="m3")]
    agent.script([{"config_update": changed}, {"text": "switched"}], config_options=OPTIONS)
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            await runtime.run("go", MemorySink())
            assert runtime.choices().models() == ("m3",)
            assert runtime.choices().efforts() == ()


# -- compaction ---------------------------------------------------------------------------------


COMPACT = [{"name": "compact", "description": "Compact the conversation"}]


async def test_an_advertised_compact_command_is_sent_as_a_prompt(agent: FakeAcp) -> None:
    agent.script("default", commands=COMPACT, prompt_turns={"/compact": [{"text": "compacted"}]})
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            await runtime.run("one", MemorySink())
            session = runtime.session_id
            await runtime.compact(MemorySink())
            assert runtime.session_id == session
    assert [p["text"] for p in agent.events("prompt")] == ["one", "/compact"]


async def test_past_the_watermark_checkpoint_then_compact(agent: FakeAcp) -> None:
    agent.script(
        [{"usage": {"used": 90, "size": 100}}, {"text": "big"}],
        "default",
        commands=COMPACT,
        prompt_turns={"/compact": [{"usage": {"used": 10, "size": 100}}, {"text": "compacted"}]},
    )
    policy = CompactionPolicy(watermark=0.8, checkpoint_prompt="save your notes")
    with trio.fail_after(GUARD):
        async with agent.runtime(compaction=policy) as runtime:
            await runtime.run("go", MemorySink())
    assert [p["text"] for p in agent.events("prompt")] == ["go", "save your notes", "/compact"]


async def test_without_a_compact_command_checkpoint_then_archive(agent: FakeAcp) -> None:
    agent.script("default")
    with trio.fail_after(GUARD):
        async with agent.runtime(compaction=CompactionPolicy(checkpoint_prompt="notes")) as runtime:
            await runtime.run("one", MemorySink())
            first = runtime.session_id
            await runtime.compact(MemorySink())
            assert runtime.session_id is None
            await runtime.run("two", MemorySink())
            assert runtime.session_id not in (None, first)
    assert [p["text"] for p in agent.events("prompt")] == ["one", "notes", "two"]
    assert len(agent.events("session_created")) == 2


@pytest.mark.parametrize("failure", [[{"error": -32603}], [{"silent": True}]])
async def test_a_failing_compact_command_archives_without_a_second_checkpoint(
    agent: FakeAcp, monkeypatch: pytest.MonkeyPatch, failure: list[object]
) -> None:
    agent.script(
        [{"usage": {"used": 95, "size": 100}}, {"text": "big"}],
        "default",
        commands=COMPACT,
        prompt_turns={"/compact": failure},
    )
    policy = CompactionPolicy(watermark=0.8, checkpoint_prompt="save your notes")
    with trio.fail_after(GUARD):
        async with agent.runtime(compaction=policy, compact_idle=0.5) as runtime:
            await runtime.run("go", MemorySink())
            assert runtime.session_id is None  # archived
            await runtime.run("after", MemorySink())  # a new session; no compaction retried
    assert [p["text"] for p in agent.events("prompt")] == ["go", "save your notes", "/compact", "after"]


# -- what hive sends is ACP, by the SDK's own models ---------------------------------------------


async def test_every_message_hive_sends_validates_against_the_sdks_schema(agent: FakeAcp) -> None:
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    agent.script(
        [{"permission": {"toolCall": {"toolCallId": "t1"}, "options": options}}, {"text": "hi"}],
        WORKING,
        config_options=OPTIONS,
    )
    servers = (StdioServer(name="bash", command="b"), HttpServer(name="h", url="http://127.0.0.1:1/mcp"))
    with trio.fail_after(GUARD):
        async with agent.runtime(model="m2", mcp_servers=servers) as runtime:
            await runtime.run("one", MemorySink())
            await run_and_cancel(runtime, MemorySink(), after_lines=1)  # no init: the session is known
            session = runtime.session_id
        async with agent.runtime(session_id=session) as runtime:
            await runtime.run("two", MemorySink())
    models = {
        "initialize": sdk.InitializeRequest,
        "session/new": sdk.NewSessionRequest,
        "session/load": sdk.LoadSessionRequest,
        "session/prompt": sdk.PromptRequest,
        "session/cancel": sdk.CancelNotification,
        "session/set_config_option": sdk.SetSessionConfigOptionSelectRequest,
    }
    checked = set()
    for message in agent.inbound():
        assert message["jsonrpc"] == "2.0"
        if "method" in message:
            models[message["method"]].model_validate(message["params"])
            checked.add(message["method"])
        else:
            sdk.RequestPermissionResponse.model_validate(message["result"])
            checked.add("permission answer")
    assert checked == {*models, "permission answer"}


def test_logging_names_no_secrets() -> None:
    logging.getLogger("hive.acp").debug("nothing")  # the backend logs through hive.acp.*
    assert _runtime.log.name.startswith("hive.acp")


async def test_a_permission_asked_while_the_turn_is_being_cancelled_is_answered_cancelled(
    agent: FakeAcp,
) -> None:
    options = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
    asking = {
        "permission": {"toolCall": {"toolCallId": "t1", "title": "rm -rf build"}, "options": options},
        "id": "perm-1",
    }
    agent.script(WORKING, "default", on_cancel={"late": 0.2, "updates": [asking]})
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
    assert outcome.stop_reason is StopReason.CANCELLED
    (permission,) = agent.events("permission")
    assert permission["outcome"] == "cancelled"
    answer = next(e for e in agent.events("response") if e.get("id") == "perm-1")
    assert answer["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_a_cancel_while_the_turn_is_being_set_up_is_not_lost(agent: FakeAcp) -> None:
    agent.script("default")

    class CancelAtInit(MemorySink):
        async def write(self, batch: Any) -> None:
            await super().write(batch)
            if b'"subtype":"init"' in batch.data:
                runtime.canceller().cancel()  # after session/new, before the prompt goes out

    sink = CancelAtInit()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outcome = await runtime.run("go", sink)
            after = await runtime.run("next", MemorySink())
            signalled = SIGNALS_SENT[sent_before:]
    assert outcome.stop_reason is StopReason.CANCELLED
    assert outcome.errors == ("the turn was cancelled while waiting for the prompt to be sent",)
    # The agent was between requests: no prompt went out, so there was nothing to cancel or signal.
    assert agent.inbound("session/cancel") == [] and signalled == []
    assert [p["text"] for p in agent.events("prompt")] == ["next"]
    assert after.stop_reason is StopReason.COMPLETED and len(agent.pids()) == 1


# -- every way a turn ends early takes the one stop path ------------------------------------------


async def run_in_cancelled_scope(runtime: Any, sink: MemorySink, after_lines: int = 2) -> trio.CancelScope:
    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:

            async def cancel_from_outside() -> None:
                await sink.wait_for_lines(after_lines)
                outer.cancel()

            nursery.start_soon(cancel_from_outside)
            await runtime.run("go", sink)
    return outer


async def test_a_cancelled_scope_around_run_sends_session_cancel_before_the_next_prompt(
    agent: FakeAcp,
) -> None:
    agent.script(WORKING, "default")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            outer = await run_in_cancelled_scope(runtime, sink)
            after = await runtime.run("next", MemorySink())
    assert outer.cancelled_caught
    sent = [m.get("method") for m in agent.inbound() if m.get("method", "").startswith("session/")]
    assert sent == ["session/new", "session/prompt", "session/cancel", "session/prompt"]
    assert result_of(sink)["errors"] == ["the turn was cancelled"]
    assert after.stop_reason is StopReason.COMPLETED and len(agent.pids()) == 1


async def test_a_cancelled_scope_around_run_with_an_agent_deaf_to_the_cancel_ends_in_sigint(
    agent: FakeAcp,
) -> None:
    agent.script(WORKING, "default", on_cancel="never", count_turns="state")
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with agent.runtime(cancel_grace=0.5) as runtime:
            outer = await run_in_cancelled_scope(runtime, sink)
            first = agent.pids()[0]
            await wait_exited(first)  # SIGINT ended it within the stop grace
            after = await runtime.run("next", MemorySink())
    assert outer.cancelled_caught and after.stop_reason is StopReason.COMPLETED
    assert next((e["pid"], e["signal"]) for e in agent.events("signal")) == (first, "SIGINT")
    assert [s.signal for s in SIGNALS_SENT[sent_before:] if s.pid == first] == ["SIGINT"]
    assert {s.signal for s in SIGNALS_SENT[sent_before:]} == {"SIGINT"}
    assert "was sent SIGINT" in result_of(sink)["errors"][0]


async def test_a_hung_session_new_is_stopped_with_sigint_and_says_what_it_waited_for(agent: FakeAcp) -> None:
    agent.script("default", hang=["session/new"])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            async with trio.open_nursery() as nursery:
                outcomes: list[Any] = []

                async def turn() -> None:
                    outcomes.append(await runtime.run("go", sink))

                nursery.start_soon(turn)
                await agent.wait_for_event("hang")
                runtime.canceller().cancel()
            (pid,) = agent.pids()
            await wait_exited(pid)
    (outcome,) = outcomes
    assert (outcome.stop_reason, outcome.interrupted, outcome.synthesized) == (
        StopReason.CANCELLED,
        True,
        True,
    )
    assert outcome.errors == (
        "the turn was cancelled while waiting for the ACP agent to answer session/new; the agent was sent SIGINT",
    )
    assert result_of(sink)["hive"]["killed"] is True
    assert agent.signals() == ["SIGINT"]


async def test_a_prompt_write_blocked_on_a_full_pipe_is_stopped_with_sigint(agent: FakeAcp) -> None:
    agent.script("default", deaf_after="session/new")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime() as runtime:
            async with trio.open_nursery() as nursery:
                outcomes: list[Any] = []

                async def turn() -> None:
                    outcomes.append(await runtime.run("x" * (4 << 20), sink))

                nursery.start_soon(turn)
                await agent.wait_for_event("deaf")
                # The answer to session/new is in hive's pipe once the agent records it as sent;
                # hive reads it, writes the prompt, and blocks on the full pipe.
                await wait_until(lambda: session_answers(agent), agent.record_path.parent)
                await trio.testing.wait_all_tasks_blocked()
                assert runtime.progress.waiting_for == "the ACP agent to read the prompt"
                runtime.canceller().cancel()
            (pid,) = agent.pids()
            await wait_exited(pid)
    (outcome,) = outcomes
    assert (outcome.stop_reason, outcome.interrupted) == (StopReason.CANCELLED, True)
    assert "while waiting for the ACP agent to read the prompt" in outcome.errors[0]
    assert agent.signals() == ["SIGINT"]


async def test_a_cancel_that_cannot_be_written_is_given_up_after_the_cancel_grace(agent: FakeAcp) -> None:
    # The agent stops reading once it has the prompt and floods permission requests: hive's
    # answers fill the pipe and hold the send lock, so session/cancel can never be written.
    permission = {"toolCall": {"toolCallId": "t1", "title": "rm x", "kind": "execute"}}
    flood = [{"permission": permission, "wait": False} for _ in range(2000)]
    agent.script([*flood, {"silent": True}], deaf_after="session/prompt")
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with agent.runtime(cancel_grace=0.5) as runtime:
            async with trio.open_nursery() as nursery:
                outcomes: list[Any] = []

                async def turn() -> None:
                    outcomes.append(await runtime.run("go", sink))

                nursery.start_soon(turn)
                await agent.wait_for_event("deaf")
                await sink.wait_for_lines(1)
                await trio.testing.wait_all_tasks_blocked()  # hive's answers are stuck in the pipe
                runtime.canceller().cancel()
            (pid,) = agent.pids()
            await wait_exited(pid)
    (outcome,) = outcomes
    assert (outcome.stop_reason, outcome.interrupted) == (StopReason.CANCELLED, True)
    assert agent.inbound("session/cancel") == []  # never written, and the stop did not hang on it
    assert agent.signals() == ["SIGINT"]


async def test_an_unknown_session_fails_with_session_not_found(agent: FakeAcp) -> None:
    agent.script("default")
    with trio.fail_after(GUARD):
        async with agent.runtime(session_id="sess_unknown") as runtime:
            with pytest.raises(SessionNotFound, match="no session 'sess_unknown'"):
                await runtime.run("go on", MemorySink())
    assert agent.events("session_created") == []  # no new session behind the user's back
