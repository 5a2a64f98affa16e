"""The agent socket's wire (hive.agent_socket): encoding, decoding, and the server loop over a real Unix socket."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from hive.agent_socket import (
    MAX_LINE,
    AgentReply,
    AgentRequest,
    AgentRequestError,
    AgentStatus,
    Compact,
    Prompt,
    Refused,
    Status,
    Wake,
    WakeRefused,
    decode_reply,
    decode_request,
    encode,
    end_id,
    open_agent_connection,
    send_wake,
    serve_agent_socket,
)
from tests.helpers.agent_loop import raw_client
from tests.helpers.strategies import wake_request_like

# -- encoding and decoding ------------------------------------------------------------------------


def test_wake_goes_on_the_wire_with_from_not_sender() -> None:
    line = encode(Wake(sender="bash-task-ab12", body="done\n", transient=False))
    assert line.endswith(b"\n")
    assert json.loads(line) == {
        "type": "wake",
        "from": "bash-task-ab12",
        "body": "done\n",
        "transient": False,
    }
    assert decode_request(line) == Wake("bash-task-ab12", "done\n", transient=False)


def test_a_wake_carries_its_end_id_when_it_has_one_and_leaves_it_out_otherwise() -> None:
    assert b"end_id" not in encode(Wake(sender="bash-task-a", body="x"))
    wire = json.loads(encode(Wake(sender="bash-task-a", body="x", end_id=end_id("a", "s1"))))
    assert wire["end_id"] == "a:s1"
    # A sender that does not know end ids, and one that does, are both understood.
    old = decode_request(b'{"type":"wake","from":"bash-task-a","body":"x"}')
    assert isinstance(old, Wake) and old.end_id is None
    new = decode_request(b'{"type":"wake","from":"bash-task-a","body":"x","end_id":"a:s1"}')
    assert isinstance(new, Wake) and new.end_id == "a:s1"
    with pytest.raises(AgentRequestError, match="end_id"):
        decode_request(b'{"type":"wake","from":"bash-task-a","body":"x","end_id":12}')


def test_wake_is_transient_unless_it_says_otherwise() -> None:
    assert decode_request(b'{"type":"wake","from":"a","body":"b"}') == Wake("a", "b", transient=True)


def test_compact_round_trip() -> None:
    assert json.loads(encode(Compact())) == {"type": "compact"}
    assert decode_request(encode(Compact())) == Compact()


def test_prompt_and_status_round_trip() -> None:
    assert json.loads(encode(Prompt("look at the logs"))) == {
        "type": "prompt",
        "text": "look at the logs",
        "from": "operator",
    }
    assert decode_request(b'{"type":"prompt","text":"hi"}') == Prompt("hi")
    assert decode_request(b'{"type":"prompt","text":"hi","from":"ops"}') == Prompt("hi", sender="ops")
    assert json.loads(encode(Status())) == {"type": "status"}
    assert decode_request(b'{"type":"status"}') == Status()
    with pytest.raises(AgentRequestError, match="missing text"):
        decode_request(b'{"type":"prompt"}')
    with pytest.raises(AgentRequestError, match="malformed prompt request"):
        decode_request(b'{"type":"prompt","text":3}')


def test_a_status_reply_carries_the_status_and_a_plain_reply_does_not() -> None:
    status = AgentStatus(
        state="turn", session_id="s1", queue=3, carrying=2, turns=7, context_used=5, context_size=10
    )
    line = encode(AgentReply(ok=True, status=status))
    wire = json.loads(line)
    assert wire["ok"] is True
    assert wire["status"]["state"] == "turn"
    assert wire["status"]["queue"] == 3
    assert decode_reply(line) == AgentReply(ok=True, status=status)
    assert "status" not in json.loads(encode(AgentReply(ok=True)))
    with pytest.raises(AgentRequestError, match="malformed reply"):
        decode_reply(b'{"ok":true,"status":{"state":"asleep"}}')
    with pytest.raises(AgentRequestError, match="malformed reply"):
        decode_reply(b'{"ok":true,"status":{"state":"idle","queue":"3"}}')


def test_reply_wire_form() -> None:
    assert encode(AgentReply(ok=True)) == b'{"ok":true}\n'
    assert json.loads(encode(AgentReply(ok=False, error="nope"))) == {"ok": False, "error": "nope"}
    assert decode_reply(b'{"ok":true}') == AgentReply(ok=True)
    assert decode_reply(b'{"ok":false,"error":"nope"}') == AgentReply(ok=False, error="nope")


@given(sender=st.text(), body=st.text(), transient=st.booleans())
def test_wake_round_trips_any_strings_on_one_line(sender: str, body: str, transient: bool) -> None:
    wake = Wake(sender=sender, body=body, transient=transient)
    line = encode(wake)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")  # one request, one line, whatever the body
    raw = json.loads(line)
    assert raw["from"] == sender
    assert "sender" not in raw
    assert decode_request(line.rstrip(b"\n")) == wake


@given(ok=st.booleans(), error=st.none() | st.text())
def test_reply_round_trips(ok: bool, error: str | None) -> None:
    reply = AgentReply(ok=ok, error=error)
    line = encode(reply)
    assert line.count(b"\n") == 1
    assert decode_reply(line) == reply


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"", "not JSON"),
        (b"wake me", "not JSON"),
        (b'{"type":"wake"', "not JSON"),
        (b"\xff\xfe\x00", "not JSON"),
        (b'["wake"]', "expected a JSON object"),
        (b'"wake"', "expected a JSON object"),
        (b"null", "expected a JSON object"),
        (b'{"type":"nap"}', "unknown request type 'nap'"),
        (b'{"type":"nap"}', "expected 'wake', 'prompt', 'compact' or 'status'"),
        (b'{"from":"a","body":"b"}', "unknown request type None"),
        (b'{"type":"wake","from":"a"}', "body"),
        (b'{"type":"wake","body":"b"}', "from"),  # the wire's name for the field, not the attribute's
    ],
)
def test_decode_request_refuses_malformed_lines_saying_why(line: bytes, says: str) -> None:
    with pytest.raises(AgentRequestError) as caught:
        decode_request(line)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "fields",
    [
        {"from": 12, "body": "b"},
        {"from": "a", "body": None},
        {"from": "a", "body": ["b"]},
        {"from": "a", "body": "b", "transient": "no"},
        {"from": "a", "body": "b", "transient": 2},
        {"from": "a", "body": "b", "transient": None},
    ],
    ids=["from-int", "body-null", "body-list", "transient-string", "transient-int", "transient-null"],
)
def test_decode_request_refuses_wrong_types(fields: dict[str, Any]) -> None:
    """Not coerced: "transient": "no" must not become True, a null body must not become 'None'."""
    line = json.dumps({"type": "wake", **fields}).encode()
    with pytest.raises(AgentRequestError, match="malformed wake request"):
        decode_request(line)


@pytest.mark.parametrize("kind", [[], {}, ["wake"]], ids=["list", "object", "list-of-wake"])
def test_decode_request_refuses_an_unhashable_type(kind: Any) -> None:
    with pytest.raises(AgentRequestError, match="unknown request type"):
        decode_request(json.dumps({"type": kind, "from": "a", "body": "b"}).encode())


def test_decode_request_refuses_deeply_nested_json() -> None:
    with pytest.raises(AgentRequestError):
        decode_request(b"[" * 100_000)


@given(st.binary())
def test_arbitrary_bytes_raise_nothing_but_agent_request_error(line: bytes) -> None:
    try:
        decoded = decode_request(line)
    except AgentRequestError as exc:
        assert str(exc)
    else:
        assert isinstance(decoded, Wake | Prompt | Compact | Status)


@given(wake_request_like)
def test_arbitrary_json_objects_raise_nothing_but_agent_request_error(raw: dict[str, Any]) -> None:
    try:
        decoded = decode_request(json.dumps(raw).encode())
    except AgentRequestError as exc:
        assert str(exc)
    else:
        assert isinstance(decoded, Wake | Prompt | Compact | Status)


# -- the server loop over a real socket -----------------------------------------------------------


@asynccontextmanager
async def agent_server(
    path: Path, handler: Any = None
) -> AsyncIterator[tuple[list[AgentRequest], trio.SocketListener]]:
    """Serve ``path`` for the block; yields the requests the default handler took, and the listener."""
    taken: list[AgentRequest] = []

    async def take(request: AgentRequest) -> None:
        taken.append(request)

    async with trio.open_nursery() as nursery:
        listener = await nursery.start(serve_agent_socket, path, handler or take)
        yield taken, listener
        nursery.cancel_scope.cancel()


async def test_a_wake_reaches_the_handler_and_is_acknowledged(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    with trio.fail_after(10):
        async with agent_server(path) as (taken, _):
            await send_wake(path, Wake("bash-task-x", "exit code 0\n"))
            assert taken == [Wake("bash-task-x", "exit code 0\n")]
            async with open_agent_connection(path) as conn:
                await conn.wake(Wake("bash-task-y", "one"))
                await conn.wake(Wake("bash-task-z", "two", transient=False))
            assert [w.sender for w in taken if isinstance(w, Wake)] == [
                "bash-task-x",
                "bash-task-y",
                "bash-task-z",
            ]
            assert taken[-1] == Wake("bash-task-z", "two", transient=False)


async def test_the_socket_is_private(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    async with agent_server(path):
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) == 0o600


async def take_nothing(request: AgentRequest) -> None:
    raise AssertionError(f"no request was expected here, got {request}")


async def test_a_malformed_line_is_refused_and_the_connection_stays_usable(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    with trio.fail_after(10):
        async with agent_server(path) as (taken, _), raw_client(path) as client:
            bad = await client.ask(b"this is not json\n")
            assert bad is not None
            assert bad["ok"] is False
            assert "not JSON" in bad["error"]
            unknown = await client.ask(b'{"type":"nap"}\n')
            assert unknown is not None
            assert unknown["ok"] is False
            assert "nap" in unknown["error"]
            # Blank lines are skipped without an answer; the next good request is answered in order.
            good = await client.ask(b"\n  \n" + encode(Wake("bash-task-ok", "fine")))
            assert good == {"ok": True}
            assert taken == [Wake("bash-task-ok", "fine")]


async def test_a_handler_that_raises_is_an_ok_false_and_wake_refused(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"

    async def refuse(request: AgentRequest) -> None:
        raise RuntimeError("the inbox is full")

    with trio.fail_after(10):
        async with agent_server(path, refuse):
            with pytest.raises(WakeRefused, match="the inbox is full"):
                await send_wake(path, Wake("bash-task-x", "body"))
            async with raw_client(path) as client:
                answer = await client.ask(encode(Wake("bash-task-x", "body")))
                assert answer is not None
                assert answer["ok"] is False
                assert "the inbox is full" in answer["error"]
                # The connection survives a refusal too.
                again = await client.ask(encode(Compact()))
                assert again is not None
                assert again["ok"] is False


async def test_a_refusal_is_answered_with_its_message_alone(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"

    async def refuse(request: AgentRequest) -> None:
        raise Refused("the queue is full: try again later")

    with trio.fail_after(10):
        async with agent_server(path, refuse), open_agent_connection(path) as conn:
            reply = await conn.request(Prompt("hello"))
            assert reply == AgentReply(ok=False, error="the queue is full: try again later")


async def test_a_status_request_is_answered_with_what_the_handler_returns(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    status = AgentStatus(state="idle", session_id="abc", queue=0, turns=2)

    async def answer(request: AgentRequest) -> AgentStatus | None:
        return status if isinstance(request, Status) else None

    with trio.fail_after(10):
        async with agent_server(path, answer), open_agent_connection(path) as conn:
            assert await conn.status() == status
            assert await conn.request(Compact()) == AgentReply(ok=True)


async def test_a_compact_request_is_answered_ok(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    with trio.fail_after(10):
        async with agent_server(path) as (taken, _), open_agent_connection(path) as conn:
            assert await conn.request(Compact()) == AgentReply(ok=True)
            assert taken == [Compact()]


async def test_a_line_longer_than_the_limit_is_refused(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    with trio.fail_after(20):
        async with agent_server(path) as (taken, _):
            async with raw_client(path) as client:
                answer = await client.ask(b"x" * (MAX_LINE + 1))
                assert answer is not None
                assert answer["ok"] is False
                assert f"longer than {MAX_LINE} bytes" in answer["error"]
                # The connection stays: the rest of the long line is dropped up to its newline,
                # and the request after it is answered.
                more = await client.ask(b"y" * MAX_LINE + b"\n" + encode(Wake("same", "connection")))
                assert more == {"ok": True}
            await send_wake(path, Wake("after", "the long line"))
            assert taken == [Wake("same", "connection"), Wake("after", "the long line")]


@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000 + b"\n", b'{"type":[],"from":"a","body":"b"}\n'],
    ids=["deeply-nested", "unhashable-type"],
)
async def test_one_bad_line_does_not_stop_the_server(short_tmp: Path, line: bytes) -> None:
    path = short_tmp / "agent.sock"
    with trio.fail_after(10):
        async with agent_server(path) as (taken, _):
            async with raw_client(path) as client:
                answer = await client.ask(line)
                assert answer is not None, "the server hung up without answering: serve_agent_socket crashed"
                assert answer["ok"] is False
            await send_wake(path, Wake("after", "the bad line"))
            assert taken == [Wake("after", "the bad line")]


def _as_stranger(path: Path, line: bytes, uid: int) -> int:
    """Fork a child that, as ``uid``, connects to ``path``, sends ``line`` and writes back what it
    is answered, on the pipe whose reading end this returns."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plain system calls, then out
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(path))
                sock.sendall(line)
                while chunk := sock.recv(65536):
                    os.write(write_end, chunk)
        finally:
            os._exit(0)
    os.close(write_end)
    return read_end


@pytest.mark.skipif(os.geteuid() != 0, reason="a client of another uid needs root to make")
async def test_the_agent_socket_refuses_another_uid_and_says_why(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    taken: list[AgentRequest] = []

    async def handler(request: AgentRequest) -> None:
        taken.append(request)

    async with trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, path, handler)
        # Only the peer check stands in the way: the socket and its directory are opened up.
        os.chmod(short_tmp, 0o755)
        os.chmod(path, 0o666)
        answer = b""
        async with trio.lowlevel.FdStream(_as_stranger(path, encode(Wake("intruder", "hi")), 65534)) as pipe:
            with trio.fail_after(20):
                while chunk := await pipe.receive_some():
                    answer += chunk
        nursery.cancel_scope.cancel()
    reply = json.loads(answer)
    assert reply["ok"] is False
    assert f"peer uid 65534 is neither the harness's uid {os.getuid()} nor root" in reply["error"]
    assert taken == []
