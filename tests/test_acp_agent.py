"""The scriptable ACP agent (fixtures/acp_agent.py) itself, driven by a tiny raw JSON-RPC client.

Plain synchronous tests with real processes: the agent is what hive's ACP backend tests stand on,
so its own behaviour is pinned here, with no hive code involved. Every process is started in a
session of its own and SIGKILLed at teardown if it is still there.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures import acp_agent
from tests.helpers.acp_fake import EFFORT, MODEL
from tests.helpers.inotify import wait_until_blocking

Message = dict[str, Any]
# A bound on a wait that returns as soon as its message comes: the fixture starts by importing the
# ACP SDK (pydantic), which took over 5 s on 2 cores under stress and helpers' test runs.
LONGEST_WAIT = 60.0


class Agent:
    """One agent process and a raw JSON-RPC client for it: lines written and read by hand."""

    def __init__(
        self, tmp: Path, script: dict[str, Any], name: str = "agent", state: Path | None = None
    ) -> None:
        self.record_path = tmp / f"{name}.record.jsonl"
        self.stderr_path = tmp / f"{name}.stderr"
        env = dict(os.environ)
        env.update(
            FAKE_ACP_SCRIPT=json.dumps(script),
            FAKE_ACP_RECORD=str(self.record_path),
            FAKE_ACP_MAX_SECONDS="60",
            HIVE_TEST_MARK="acp",
        )
        if state is not None:
            env["FAKE_ACP_STATE"] = str(state)
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                acp_agent.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=tmp,
                start_new_session=True,
            )
        assert self.process.stdout is not None
        self.fd = self.process.stdout.fileno()
        self.buffer = b""
        self.raw_lines: list[bytes] = []  # every stdout line, as it came
        self.eof = False
        self.sent: list[Message] = []
        self.next_id = 100

    # the wire

    def send(self, message: Message) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        self.sent.append(message)

    def receive(self, timeout: float = LONGEST_WAIT) -> Message:
        message: Message = json.loads(self.receive_line(timeout))
        return message

    def receive_line(self, timeout: float = LONGEST_WAIT) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.eof:
                raise EOFError(self.buffer)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("nothing from the agent in time")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                self.eof = not chunk
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        self.raw_lines.append(line)
        return line

    def quiet_for(self, seconds: float) -> bool:
        """True if nothing at all comes for ``seconds``."""
        if b"\n" in self.buffer:
            return False
        ready, _, _ = select.select([self.fd], [], [], seconds)
        return not ready

    # JSON-RPC

    def request(
        self,
        method: str,
        params: Any,
        *,
        answer: Callable[[Message], Message | None] | None = None,
        timeout: float = LONGEST_WAIT,
    ) -> tuple[Message, list[Message]]:
        """Send a request; read up to its response. Returns the response and everything that
        came before it; requests from the agent are answered with ``answer`` (default -32601)."""
        request_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.until_response(request_id, answer=answer, timeout=timeout)

    def until_response(
        self,
        request_id: Any,
        *,
        answer: Callable[[Message], Message | None] | None = None,
        timeout: float = LONGEST_WAIT,
    ) -> tuple[Message, list[Message]]:
        before: list[Message] = []
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(deadline - time.monotonic())
            if "method" not in message and message.get("id") == request_id:
                return message, before
            before.append(message)
            if "method" in message and "id" in message:
                reply = answer(message) if answer else None
                if reply is None:
                    reply = {"error": {"code": -32601, "message": "Method not found"}}
                self.send({"jsonrpc": "2.0", "id": message["id"], **reply})

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def start_session(self, **params: Any) -> str:
        response, _ = self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert response["result"]["protocolVersion"] == 1
        response, _ = self.request("session/new", {"cwd": "/tmp", "mcpServers": [], **params})
        session_id: str = response["result"]["sessionId"]
        return session_id

    def prompt(self, session_id: str, text: str, **kwargs: Any) -> tuple[Message, list[Message]]:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return self.request("session/prompt", params, **kwargs)

    # the record, the end

    def events(self, kind: str | None = None) -> list[Message]:
        events = acp_agent.read_record(self.record_path)
        return [e for e in events if kind is None or e["event"] == kind]

    def wait_for_event(self, kind: str, count: int = 1, timeout: float = LONGEST_WAIT) -> Message:
        """The ``count``-th event of this kind, once it is in the record."""
        try:
            found = wait_until_blocking(
                lambda: (events := self.events(kind))[count - 1 :] and events,
                self.record_path.parent,
                timeout=timeout,
            )
        except TimeoutError:
            raise TimeoutError(f"no {kind} event number {count} in the record") from None
        return found[count - 1]

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def finish(self, timeout: float = LONGEST_WAIT) -> int:
        """Close stdin, read stdout to EOF, wait for the exit; its status."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        deadline = time.monotonic() + timeout
        while not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the agent's stdout stayed open")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                self.eof = not chunk
                self.buffer += chunk
        self.raw_lines += self.buffer.splitlines()
        self.buffer = b""
        return self.process.wait(max(0.1, deadline - time.monotonic()))

    def check_stdout_is_json_rpc(self) -> None:
        for line in self.raw_lines:
            message = json.loads(line)
            assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(script: dict[str, Any], **kwargs: Any) -> Agent:
        agent = Agent(tmp_path, script, **kwargs)
        started.append(agent)
        return agent

    try:
        yield start
    finally:
        for agent in started:
            agent.kill()


def updates(messages: list[Message]) -> list[Message]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def test_a_turn_from_initialize_to_result(agents: Callable[..., Agent]) -> None:
    unknown_kind = {"sessionUpdate": "_acme_thing", "payload": [1, 2]}
    extra_fields = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "x"},
        "weird": True,
        "_meta": {"a": 1},
    }
    string_id_request = {
        "jsonrpc": "2.0",
        "id": "e1",
        "method": "elicitation/create",
        "params": {"message": "?"},
    }
    turn1 = [
        {"text": "Looking", "messageId": "m1"},
        {"thought": "plan: read"},
        {"tool_update": {"toolCallId": "t9", "status": "in_progress"}},
        {
            "tool_call": {
                "toolCallId": "t9",
                "title": "Read a.py",
                "kind": "read",
                "rawInput": {"path": "a.py"},
            }
        },
        {"tool_update": {"toolCallId": "t9", "status": "completed", "rawOutput": {"lines": 42}}},
        {"plan": [{"content": "Read code", "priority": "high", "status": "in_progress"}]},
        {"usage": {"used": 53000, "size": 200000, "cost": {"amount": 0.045, "currency": "USD"}}},
        {"config_update": [{**MODEL, "currentValue": "m2"}]},
        {"raw_update": unknown_kind},
        {"raw_update": extra_fields},
        {"raw": string_id_request},
        {"request": {"method": "terminal/create", "params": {"command": "pytest"}}},
        {"echo_prompt": True},
        {"stop": "end_turn", "usage": {"totalTokens": 7}},
    ]
    script = {
        "commands": [{"name": "compact", "description": "Compact the conversation"}],
        "config_options": [MODEL, EFFORT],
        "updates_after_result": [{"sessionUpdate": "usage_update", "used": 1, "size": 10}],
        "turns": [turn1, [{"echo_prompt": "turn {turn}: {prompt}"}]],
    }
    agent = agents(script)
    response, _ = agent.request(
        "initialize", {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"}}
    )
    result = response["result"]
    assert result["agentCapabilities"]["loadSession"] is True
    assert result["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
    assert result["agentInfo"]["name"] == "fake-acp-agent"

    servers = [{"type": "http", "name": "hive", "url": "http://127.0.0.1:1/mcp", "headers": []}]
    response, before = agent.request("session/new", {"cwd": "/somewhere", "mcpServers": servers})
    assert before == []
    session_id = response["result"]["sessionId"]
    assert response["result"]["configOptions"] == [MODEL, EFFORT]
    commands = agent.receive()  # right after the response
    assert commands["params"] == {
        "sessionId": session_id,
        "update": {"sessionUpdate": "available_commands_update", "availableCommands": script["commands"]},
    }

    set_model = {"sessionId": session_id, "configId": "model", "value": "m2"}
    response, _ = agent.request("session/set_config_option", set_model)
    assert response["result"]["configOptions"] == [{**MODEL, "currentValue": "m2"}, EFFORT]
    response, _ = agent.request("session/set_config_option", {**set_model, "value": "opus"})
    assert response["error"]["code"] == -32602

    asked: list[Message] = []

    def answer(request: Message) -> Message | None:
        asked.append(request)
        return None  # -32601, like a client without those capabilities

    response, before = agent.prompt(session_id, "hello there", answer=answer)
    assert response["result"] == {"stopReason": "end_turn", "usage": {"totalTokens": 7}}
    got = updates(before)
    assert got[0] == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Looking"},
    } | {"messageId": "m1"}
    assert [u["sessionUpdate"] for u in got] == [
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "plan",
        "usage_update",
        "config_option_update",
        "_acme_thing",
        "agent_message_chunk",
        "agent_message_chunk",
    ]
    assert got[6]["cost"] == {"amount": 0.045, "currency": "USD"}
    assert got[8] == unknown_kind  # written exactly, unknown kind and all
    assert got[9] == extra_fields  # unknown fields kept
    assert got[10]["content"]["text"] == "hello there"
    # The raw request went out as written (string id), then the SDK's own request (integer id).
    assert [(r["id"], r["method"]) for r in asked] == [("e1", "elicitation/create"), (0, "terminal/create")]
    assert asked[0] == string_id_request
    assert asked[1]["params"] == {"sessionId": session_id, "command": "pytest"}
    assert b'"id":"e1"' in next(line for line in agent.raw_lines if b"elicitation/create" in line)
    after = agent.receive()  # updates_after_result: after the answer
    assert after["params"]["update"] == {"sessionUpdate": "usage_update", "used": 1, "size": 10}

    response, before = agent.prompt(session_id, "/compact")
    assert response["result"] == {"stopReason": "end_turn"}
    assert updates(before)[0]["content"]["text"] == "turn 2: /compact"
    agent.receive()  # the after-result update
    response, before = agent.prompt(session_id, "again")  # the last turn repeats
    assert updates(before)[0]["content"]["text"] == "turn 3: again"
    agent.receive()

    assert agent.finish() == 0
    agent.check_stdout_is_json_rpc()
    # The record: every message the client wrote, exactly and in order; what was done with them.
    assert [e["message"] for e in agent.events("in")] == agent.sent
    start = agent.events("start")[0]
    assert start["env"]["HIVE_TEST_MARK"] == "acp"
    assert start["pgid"] == start["pid"] == agent.process.pid
    new = agent.events("new_session")[0]
    assert (new["cwd"], new["mcpServers"]) == ("/somewhere", servers)
    config = agent.events("set_config_option")
    assert [(e["configId"], e["value"], e["ok"]) for e in config] == [
        ("model", "m2", True),
        ("model", "opus", False),
    ]
    responses = agent.events("response")
    assert [(e["id"], e["method"], e["error"]["code"]) for e in responses] == [
        ("e1", "elicitation/create", -32601),
        (0, "terminal/create", -32601),
    ]
    prompts = agent.events("prompt")
    assert [(e["turn"], e["text"], e["command"]) for e in prompts] == [
        (1, "hello there", None),
        (2, "/compact", "compact"),
        (3, "again", None),
    ]
    assert agent.events("exit")[-1]["reason"] == "stdin EOF"


def test_cancel_modes_and_permissions(agents: Callable[..., Agent]) -> None:
    late = {
        "late": 0.4,
        "updates": [{"text": "late"}, {"tool_update": {"toolCallId": "t1", "status": "failed"}}],
    }
    aborted = {"error": -32603, "data": {"details": "This operation was aborted"}}
    permission = {"toolCall": {"toolCallId": "t3", "title": "rm -rf build", "kind": "execute"}}
    script = {
        "turns": [
            [{"text": "working"}, {"silent": True}],
            [{"on_cancel": "ignore"}, {"sleep": 0.3}, {"text": "still here"}],
            [{"on_cancel": late}, {"silent": True}],
            [{"on_cancel": "end_turn"}, {"sleep": 30}],
            [{"on_cancel": aborted}, {"silent": True}],
            [{"on_cancel": {"error": -32800}}, {"silent": True}],
            [{"permission": permission, "id": "perm-1"}, {"text": "not reached"}],
            [{"permission": permission}, {"text": "allowed"}],
            [{"on_cancel": "never"}, {"silent": True}],
        ]
    }
    agent = agents(script)
    session_id = agent.start_session()
    cancel = {"sessionId": session_id}

    def send_prompt() -> int:
        request_id = agent.next_id
        agent.next_id += 1
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        agent.send({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params})
        return request_id

    def prompt_then_cancel(wait_for_text: bool = False) -> tuple[Message, list[Message], float]:
        prompts = len(agent.events("prompt"))
        request_id = send_prompt()
        if wait_for_text:
            agent.receive()
        else:
            # A turn's first step runs as its prompt is recorded (no await in between), so the
            # on_cancel steps are in force once the prompt event is there.
            agent.wait_for_event("prompt", count=prompts + 1)
        started = time.monotonic()
        agent.notify("session/cancel", cancel)
        response, before = agent.until_response(request_id)
        return response, before, time.monotonic() - started

    # honour: the turn stops at once and answers cancelled
    response, _, took = prompt_then_cancel(wait_for_text=True)
    assert response["result"] == {"stopReason": "cancelled"} and took < 1
    # ignore: the steps go on
    response, before, _ = prompt_then_cancel()
    assert response["result"] == {"stopReason": "end_turn"}
    assert updates(before)[0]["content"]["text"] == "still here"
    # late: updates after the cancel, then cancelled
    response, before, took = prompt_then_cancel()
    assert response["result"] == {"stopReason": "cancelled"} and took >= 0.35
    assert [u["sessionUpdate"] for u in updates(before)] == ["agent_message_chunk", "tool_call_update"]
    # answered wrongly: end_turn, an abort error, -32800
    response, _, took = prompt_then_cancel()
    assert response["result"] == {"stopReason": "end_turn"} and took < 1
    response, _, _ = prompt_then_cancel()
    assert response["error"]["code"] == -32603
    assert response["error"]["data"] == {"details": "This operation was aborted"}
    response, _, _ = prompt_then_cancel()
    assert response["error"]["code"] == -32800

    # a permission request with a string id, answered "cancelled" as a cancelling client must
    def cancelled(request: Message) -> Message:
        assert request["id"] == "perm-1" and request["method"] == "session/request_permission"
        assert request["params"]["toolCall"] == permission["toolCall"]
        assert [o["kind"] for o in request["params"]["options"]] == ["allow_once", "reject_once"]
        agent.notify("session/cancel", cancel)
        return {"result": {"outcome": {"outcome": "cancelled"}}}

    response, before = agent.prompt(session_id, "delete it", answer=cancelled)
    assert response["result"] == {"stopReason": "cancelled"}
    assert updates(before) == []

    def selected(request: Message) -> Message:
        assert request["id"] == 0  # the SDK's own numbering
        return {"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}

    response, before = agent.prompt(session_id, "delete it", answer=selected)
    assert response["result"] == {"stopReason": "end_turn"}
    assert updates(before)[0]["content"]["text"] == "allowed"

    # a cancel with no turn running is not answered; never: the prompt is not answered at all
    agent.notify("session/cancel", cancel)
    assert agent.quiet_for(0.2)
    silent = len(agent.events("silent"))
    send_prompt()
    agent.wait_for_event("silent", count=silent + 1)
    agent.notify("session/cancel", cancel)
    assert agent.quiet_for(0.5)
    assert agent.process.poll() is None
    agent.process.send_signal(signal.SIGTERM)  # the default action: exit 128 + 15
    assert agent.finish() == 143
    agent.check_stdout_is_json_rpc()

    permissions = agent.events("permission")
    assert [(e["outcome"], e["answer"]) for e in permissions] == [
        ("cancelled", {"result": {"outcome": {"outcome": "cancelled"}}}),
        ("selected", {"result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}),
    ]
    outcomes = [e["mode"] for e in agent.events("cancel_outcome")]
    assert outcomes == ["honour", late, "end_turn", aborted, {"error": -32800}, "honour", "never"]
    cancels = agent.events("cancel")
    assert len(cancels) == 9
    assert cancels[-2]["running"] == []  # the idle one
    assert agent.events("signal")[-1]["signal"] == "SIGTERM"
    exit_event = agent.events("exit")[-1]
    assert (exit_event["code"], exit_event["reason"]) == (143, "signal SIGTERM")


def test_session_load_in_a_new_process_replays_the_history(
    agents: Callable[..., Agent], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    tool = {"toolCallId": "t1", "title": "Run tests", "kind": "execute", "status": "pending"}
    script = {
        "config_options": [MODEL],
        "turns": [
            [
                {"thought": "thinking"},
                {"tool_call": tool},
                {"tool_update": {"toolCallId": "t1", "status": "completed"}},
                {"usage": {"used": 10, "size": 100}},
                {"text": "the answer"},
            ],
        ],
    }
    first = agents(script, name="first", state=state)
    session_id = first.start_session()
    _, before = first.prompt(session_id, "the question")
    sent = [u for u in updates(before) if u["sessionUpdate"] != "usage_update"]
    assert first.finish() == 0

    second = agents({"turns": [[{"text": "later"}]], "load_replay": "before"}, name="second", state=state)
    second.request("initialize", {"protocolVersion": 1})
    load = {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
    response, before = second.request("session/load", load)
    assert response == {"jsonrpc": "2.0", "id": response["id"], "result": None}
    assert second.raw_lines[-1].endswith(b'"result":null}')
    assert all(m["params"]["sessionId"] == session_id for m in before)
    question = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "the question"}}
    assert updates(before) == [question, *sent]
    # the loaded session goes on, and a session nobody made is refused
    response, _ = second.prompt(session_id, "more")
    assert response["result"] == {"stopReason": "end_turn"}
    response, _ = second.request("session/load", {**load, "sessionId": "sess_nobody"})
    assert response["error"]["code"] == -32002
    assert second.finish() == 0
    loads = second.events("load_session")
    assert [(e["sessionId"], e.get("replayed"), e.get("refused")) for e in loads] == [
        (session_id, 5, None),
        ("sess_nobody", None, "unknown session"),
    ]

    third = agents({}, name="third", state=state)
    third.request("initialize", {"protocolVersion": 1})
    response, before = third.request("session/load", load)
    assert response["result"] is None
    texts = [u["content"]["text"] for u in updates(before) if "content" in u]
    assert texts == ["the question", "thinking", "the answer", "more", "later"]
    assert third.finish() == 0


def test_capabilities_commands_early_load_refused_and_crash(agents: Callable[..., Agent]) -> None:
    script = {
        "capabilities": {"loadSession": False, "mcpCapabilities": {"sse": False}},
        "commands": [{"name": "compact", "description": "Compact the conversation"}],
        "commands_before_response": True,
        "turns": [[{"text": "partial"}, {"crash": 3, "stderr": "agent fell over"}]],
    }
    agent = agents(script)
    response, _ = agent.request("initialize", {"protocolVersion": 1})
    capabilities = response["result"]["agentCapabilities"]
    assert capabilities["loadSession"] is False
    assert capabilities["mcpCapabilities"] == {"sse": False}
    http = [{"type": "http", "name": "hive", "url": "http://127.0.0.1:1/mcp", "headers": []}]
    response, _ = agent.request("session/new", {"cwd": "/tmp", "mcpServers": http})
    assert response["error"]["code"] == -32602
    response, before = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id = response["result"]["sessionId"]
    # the update for the new session comes before the response that names it
    assert updates(before) == [
        {"sessionUpdate": "available_commands_update", "availableCommands": script["commands"]}
    ]
    assert before[0]["params"]["sessionId"] == session_id
    response, _ = agent.request("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
    assert response["error"]["code"] == -32601

    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    agent.send({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": params})
    assert agent.receive()["params"]["update"]["content"]["text"] == "partial"
    with pytest.raises(EOFError):
        agent.receive()
    assert agent.finish() == 3
    assert "agent fell over" in agent.stderr()
    assert agent.events("exit")[-1]["reason"] == "crash step"
    agent.check_stdout_is_json_rpc()


def test_signals_are_recorded_and_grandchildren_too(agents: Callable[..., Agent]) -> None:
    script = {
        "on_signal": {"SIGUSR1": "ignore", "SIGINT": "exit:7"},
        "turns": [[{"spawn": "exec sleep 1000", "new_session": True}, {"text": "spawned"}]],
    }
    agent = agents(script)
    agent.wait_for_event("start")  # the handlers are in place before the start record
    agent.process.send_signal(signal.SIGUSR1)
    agent.wait_for_event("signal")
    session_id = agent.start_session()  # still there, still answering
    response, _ = agent.prompt(session_id, "go")
    assert response["result"] == {"stopReason": "end_turn"}
    spawned = agent.events("spawned")[0]
    try:
        assert spawned["pgid"] == spawned["pid"] != agent.process.pid
        assert os.getpgid(spawned["pid"]) == spawned["pid"]
    finally:
        os.kill(spawned["pid"], signal.SIGKILL)
    agent.process.send_signal(signal.SIGINT)
    assert agent.process.wait(5) == 7
    assert [e["signal"] for e in agent.events("signal")] == ["SIGUSR1", "SIGINT"]
    assert agent.events("exit")[-1]["reason"] == "signal SIGINT"


def test_the_other_knobs(agents: Callable[..., Agent]) -> None:
    ping = '{"jsonrpc":"2.0","method":"_acme/ping","params":{}}\n'
    script = {
        "fail": {"session/set_config_option": {"code": -32000, "message": "Authentication required"}},
        "prompt_turns": {"/compact": [{"text": "compacted"}]},
        "stale_cancel": True,
        "load_replay": "after",
        "on_eof": "linger",
        "capabilities": {"promptCapabilities": {"image": True}},
        "session_result_extra": {"models": {"currentModelId": "m1", "availableModels": []}},
        "turns": [[{"emit_raw": "not json\n"}, {"emit_raw": ping, "dribble": 0.002}, {"text": "t1"}]],
    }
    agent = agents(script)
    agent.request("initialize", {"protocolVersion": 1})
    response, _ = agent.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert response["result"]["models"] == {"currentModelId": "m1", "availableModels": []}
    session_id = response["result"]["sessionId"]
    response, _ = agent.request(
        "session/set_config_option", {"sessionId": session_id, "configId": "x", "value": "y"}
    )
    assert response["error"] == {"code": -32000, "message": "Authentication required", "data": None}

    # a prompt_turns entry plays without using up a turn
    response, before = agent.prompt(session_id, "/compact keep the plan")
    assert updates(before)[0]["content"]["text"] == "compacted"
    # turn 1: a line that is not JSON, a message written a byte at a time, then a chunk
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]},
        }
    )
    assert agent.receive_line() == b"not json"
    assert agent.receive_line() + b"\n" == ping.encode()
    assert agent.receive()["params"]["update"]["content"]["text"] == "t1"
    assert agent.receive()["result"] == {"stopReason": "end_turn"}

    # a cancel between turns leaves a stale flag: the next prompt answers cancelled at once
    agent.notify("session/cancel", {"sessionId": session_id})
    response, before = agent.prompt(session_id, "y")
    assert (response["result"], before) == ({"stopReason": "cancelled"}, [])

    # what the client sends is checked: by the SDK's models, and against promptCapabilities
    bogus = {"sessionId": session_id, "prompt": [{"type": "bogus"}]}
    response, _ = agent.request("session/prompt", bogus)
    assert response["error"]["code"] == -32602
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    response, _ = agent.request("session/prompt", {**bogus, "prompt": [audio]})
    assert response["error"] == {
        "code": -32602,
        "message": "prompt blocks of type audio are not supported",
        "data": {"type": "audio"},
    }

    # load_replay "after": the answer first, then the history (here from memory: no state dir)
    load = {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
    response, _ = agent.request("session/load", load)
    assert response["result"] == {"models": {"currentModelId": "m1", "availableModels": []}}
    replayed = [agent.receive()["params"]["update"] for _ in range(5)]
    assert [(u["sessionUpdate"], u["content"]["text"]) for u in replayed] == [
        ("user_message_chunk", "/compact keep the plan"),
        ("agent_message_chunk", "compacted"),
        ("user_message_chunk", "x"),
        ("agent_message_chunk", "t1"),
        ("user_message_chunk", "y"),  # refused prompts are no history
    ]
    assert agent.quiet_for(0.2)
    assert [e["turn"] for e in agent.events("prompt")] == [None, 1, 2, 3]

    # on_eof "linger": stdin closed, the agent stays until a signal
    assert agent.process.stdin is not None
    agent.process.stdin.close()
    agent.wait_for_event("linger")
    assert agent.process.poll() is None
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(5) == 143
