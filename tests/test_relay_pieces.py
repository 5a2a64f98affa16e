"""The relay's pieces that decide (no I/O), in-process: what a client line is, what the daemon
owes and by when, the handshake a reconnect replays, and the stand-in's answers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hive.bash import relay as forms
from hive.daemon import relay
from hive.daemon.relay import ClientMessage, Handshake, Invalid, Owed, StandIn, read_client_line

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=10,
)


def line(message: Any) -> bytes:
    return json.dumps(message).encode()


# -- read_client_line -------------------------------------------------------------------------------


def test_a_blank_line_is_nothing_and_garbage_is_a_parse_error() -> None:
    assert read_client_line(b"  \t") == []
    (garbage,) = read_client_line(b"{not json")
    assert isinstance(garbage, Invalid) and garbage.code == relay.PARSE_ERROR
    assert garbage.text.startswith("not JSON: ")


def test_a_request_keeps_its_line_and_a_batch_is_its_messages() -> None:
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    (one,) = read_client_line(line(request))
    assert isinstance(one, ClientMessage)
    assert (one.request_id, one.method, one.line) == (7, "tools/list", line(request) + b"\n")
    first, second, third = read_client_line(line([request, 5, {"jsonrpc": "2.0", "id": True, "method": "x"}]))
    assert isinstance(first, ClientMessage) and first.raw is None
    assert json.loads(first.line) == request
    assert isinstance(second, Invalid) and second.code == relay.INVALID_REQUEST
    assert isinstance(third, Invalid) and "id must be a string or a number" in third.text
    (empty,) = read_client_line(b"[]")
    assert isinstance(empty, Invalid) and empty.text == "an empty batch"


def test_only_a_cancel_notification_names_a_cancelled_request() -> None:
    def cancelled(message: dict[str, Any]) -> object:
        (read,) = read_client_line(line(message))
        assert isinstance(read, ClientMessage)
        return read.cancelled

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}}
    assert cancelled(cancel) == "a"
    assert cancelled({**cancel, "params": {"requestId": False}}) is None
    assert cancelled({**cancel, "id": 3}) is None  # a request of that name is no cancel
    assert cancelled({"jsonrpc": "2.0", "id": 1, "result": {}}) is None


@given(json_values)
def test_any_json_is_read_into_messages_or_errors(value: object) -> None:
    read = read_client_line(line(value))
    assert all(isinstance(item, ClientMessage | Invalid) for item in read)
    for item in read:
        if isinstance(item, ClientMessage) and item.request_id is not None:
            assert isinstance(item.method, str) and relay._is_id(item.request_id)
    if not isinstance(value, list):
        assert len(read) == 1


TURN = "00-0000000000000000000000000000feed-000000000000beef-01"


def test_a_tool_call_naming_no_span_goes_in_the_turns_and_one_naming_its_own_keeps_it() -> None:
    def sent(message: dict[str, Any]) -> Any:
        (read,) = read_client_line(line(message))
        assert isinstance(read, ClientMessage)
        return json.loads(read.in_trace(TURN).line)

    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "run", "arguments": {}}}
    assert sent(call) == {**call, "params": {**call["params"], "_meta": {"traceparent": TURN}}}
    own = {**call, "params": {**call["params"], "_meta": {"traceparent": "00-1-2-01", "progressToken": 1}}}
    assert sent(own) == own
    progress = {**call, "params": {**call["params"], "_meta": {"progressToken": 1}}}
    assert sent(progress)["params"]["_meta"] == {"progressToken": 1, "traceparent": TURN}
    for other in (
        {**call, "method": "tools/list"},
        {**call, "params": [1]},
        {**call, "params": {"_meta": 3}},
    ):
        assert sent(other) == other


@given(json_values)
def test_any_message_in_a_trace_is_still_a_message_with_its_id_and_method(value: object) -> None:
    for item in read_client_line(line(value)):
        if isinstance(item, ClientMessage):
            traced = item.in_trace(TURN)
            assert (traced.request_id, traced.method) == (item.request_id, item.method)
            assert isinstance(json.loads(traced.line), dict)


# -- Owed ---------------------------------------------------------------------------------------------


def test_what_the_daemon_owes_expires_at_its_deadline_and_a_late_answer_is_not_owed() -> None:
    owed = Owed(reply_timeout=10)
    before = time.monotonic()
    assert owed.next_deadline() is None
    owed.expect(1, "tools/call")
    owed.expect("b", "ping")
    owed.expect_own("own")
    deadline = owed.next_deadline()
    assert deadline is not None and before + 10 <= deadline <= time.monotonic() + 10
    assert owed.expire(before) == ([], [])
    assert owed.answered("b") and not owed.answered("b")
    assert owed.expire(deadline + 1) == ([(1, "tools/call")], ["own"])
    assert not owed.answered(1)  # it timed out: its late answer is dropped
    assert owed.next_deadline() is None


def test_a_cancelled_request_is_not_owed_and_take_all_empties_the_rest() -> None:
    owed = Owed(reply_timeout=10)
    owed.expect(1, "a")
    owed.expect(2, "b")
    owed.cancel(1)
    owed.cancel(99)
    assert not owed.answered(1)
    assert owed.take_all() == [(2, "b")]
    assert not owed.requests
    owed.expect_own("x")
    assert not owed.answered_own(1) and owed.answered_own("x") and not owed.answered_own("x")


# -- Handshake ----------------------------------------------------------------------------------------


def note(handshake: Handshake, message: dict[str, Any]) -> None:
    (read,) = read_client_line(line(message))
    assert isinstance(read, ClientMessage)
    handshake.note(read)


def test_the_replayed_handshake_is_the_clients_under_an_id_of_its_own() -> None:
    handshake = Handshake(forms.BASH)
    assert handshake.replay() is None  # no initialize yet: nothing to replay
    params = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "c", "version": "1"}}
    note(handshake, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    replayed = handshake.replay()
    assert replayed is not None
    own_id, lines = replayed
    (initialize,) = [json.loads(part) for part in lines.splitlines()]
    assert initialize == {"jsonrpc": "2.0", "id": own_id, "method": "initialize", "params": params}
    note(handshake, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    again = handshake.replay()
    assert again is not None and again[0] != own_id
    assert [json.loads(part)["method"] for part in again[1].splitlines()] == [
        "initialize",
        "notifications/initialized",
    ]


def test_a_request_named_like_the_notification_is_not_the_clients_initialized() -> None:
    handshake = Handshake(forms.BASH)
    note(handshake, {"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    note(handshake, {"jsonrpc": "2.0", "id": 2, "method": "notifications/initialized"})
    replayed = handshake.replay()
    assert replayed is not None
    (initialize,) = [json.loads(part) for part in replayed[1].splitlines()]
    assert "params" not in initialize


# -- StandIn ------------------------------------------------------------------------------------------


def answer(stand_in: StandIn, method: str, params: object = None) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(stand_in.answer(9, method, params, "no socket there"))
    assert message["id"] == 9
    return message


def test_the_stand_in_answers_the_handshake_the_tools_and_a_call_naming_the_socket() -> None:
    stand_in = StandIn("/run/bash.sock", relayed=forms.BASH)
    init = answer(stand_in, "initialize", {"protocolVersion": "2025-03-26"})["result"]
    assert init["protocolVersion"] == "2025-03-26"
    assert init["capabilities"] == {"tools": {"listChanged": True}}
    assert init["serverInfo"]["name"] == "bash"
    assert answer(stand_in, "ping")["result"] == {}
    assert not stand_in.tools_changed()  # the client holds no stand-in tool list yet
    tools = answer(stand_in, "tools/list")["result"]["tools"]
    assert tuple(tool["name"] for tool in tools) == forms.TOOL_NAMES
    called = answer(stand_in, "tools/call", {"name": "run"})["result"]
    assert called["isError"] is True
    assert (
        "/run/bash.sock" in called["content"][0]["text"] and "no socket there" in called["content"][0]["text"]
    )
    other = answer(stand_in, "resources/list")["error"]
    assert other["code"] == relay.UNAVAILABLE and "/run/bash.sock" in other["message"]
    assert stand_in.tools_changed() and not stand_in.tools_changed()  # said once


def test_the_hyperhive_stand_in_is_the_hyperhive_server_and_says_hive_agent_is_down() -> None:
    stand_in = StandIn("/s/hyperhive.sock", relayed=forms.HYPERHIVE)
    init = answer(stand_in, "initialize", {"protocolVersion": "2025-06-18"})["result"]
    assert init["serverInfo"]["name"] == "hyperhive"
    assert "`loose_ends`" in init["instructions"] and "run`" not in init["instructions"]
    tools = answer(stand_in, "tools/list")["result"]["tools"]
    assert [tool["name"] for tool in tools] == ["loose_ends", "compact"]
    said = answer(stand_in, "tools/call", {"name": "compact"})["result"]["content"][0]["text"]
    assert said.startswith(
        "hive-hyperhive-mcp cannot reach hive-agent's hyperhive server at /s/hyperhive.sock"
    )
    assert "hive-bash-daemon" not in said and "HIVE_BASH_SOCKET" not in said
    assert "hive-agent, the harness that serves them, is not running" in said


def test_the_replayed_initialize_is_named_after_the_relay() -> None:
    for relayed in (forms.BASH, forms.HYPERHIVE):
        handshake = Handshake(relayed)
        handshake.note(ClientMessage({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, None))
        replayed = handshake.replay()
        assert replayed is not None
        assert replayed[0] == f"{relayed.program}:replayed-initialize:1"


def test_the_stand_in_says_the_tools_changed_only_to_a_client_it_initialized() -> None:
    stand_in = StandIn("/s", relayed=forms.BASH)
    answer(stand_in, "tools/list")
    assert not stand_in.tools_changed()


def test_while_the_harness_says_its_daemon_is_down_the_stand_in_says_that_instead(tmp_path: Path) -> None:
    outage = tmp_path / "bash-daemon-down"
    stand_in = StandIn("/run/bash.sock", str(outage), relayed=forms.BASH)
    assert (
        "Start it with `hive-bash-daemon`"
        in answer(stand_in, "tools/call", {"name": "run"})["result"]["content"][0]["text"]
    )
    outage.write_text("the bash daemon of this agent is down since 10:00:00 (killed by SIGKILL); ...\n")
    called = answer(stand_in, "tools/call", {"name": "run"})["result"]
    assert called["isError"] is True
    assert called["content"][0]["text"] == outage.read_text().strip()
    listed = answer(stand_in, "tools/list")["result"]["tools"][0]["description"]
    assert "the bash daemon of this agent is down" in listed and "hive-bash-daemon`" not in listed
