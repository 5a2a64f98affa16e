"""Random bytes on any of hive's sockets end at most their own connection: the bash daemon's, the
agent socket and the subagent daemon's each go on serving (one server for all the examples)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.daemon import shared_daemon
from tests.helpers.jsonrpc import INITIALIZE, answers_initialize, raw_exchange
from tests.helpers.servers import (
    agent_socket_in_a_thread,
    agent_takes_a_wake,
    subagent_daemon_process,
    subagent_status,
)
from tests.helpers.strategies import socket_payloads


def expected_answers(junk: bytes) -> int:
    """How many answers the agent socket owes for ``junk`` followed by the end of the stream."""
    *lines, rest = junk.split(b"\n")
    return sum(1 for line in lines if line.strip()) + (1 if rest else 0)


def agent_answered_each_line(payload: bytes, half_closed: bool, reply: bytes) -> None:
    """The agent socket answers every line (and a last unterminated one), each with its ``ok``."""
    if half_closed:
        answers = [json.loads(line) for line in reply.splitlines()]
        assert len(answers) == expected_answers(payload)
        assert all(isinstance(a["ok"], bool) for a in answers)


def anything(payload: bytes, half_closed: bool, reply: bytes) -> None:
    """No more is promised than that the server goes on."""


@attrs.frozen
class Fuzzed:
    """A server under fuzz: its socket, a well-formed question it must still answer, and what
    its answers to the junk must be."""

    path: str
    answers: Callable[[str], bool]
    judge: Callable[[bytes, bool, bytes], None]


@pytest.fixture(scope="module", params=["bash-daemon", "agent-socket", "subagent-daemon"])
def fuzzed(request: pytest.FixtureRequest) -> Iterator[Fuzzed]:
    """One server for all the examples, started outside any Trio run."""
    if request.param == "bash-daemon":
        with shared_daemon() as handle:
            yield Fuzzed(str(handle.socket), answers_initialize, anything)
    elif request.param == "agent-socket":
        with agent_socket_in_a_thread() as path:
            yield Fuzzed(str(path), agent_takes_a_wake, agent_answered_each_line)
    else:
        with subagent_daemon_process() as path:
            yield Fuzzed(str(path), subagent_status, anything)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=socket_payloads(INITIALIZE), half_close=st.booleans())
def test_random_bytes_never_stop_the_server(fuzzed: Fuzzed, payload: bytes, half_close: bool) -> None:
    reply = raw_exchange(fuzzed.path, payload, half_close, hang_up=not half_close)
    fuzzed.judge(payload, half_close, reply)
    assert fuzzed.answers(fuzzed.path)
