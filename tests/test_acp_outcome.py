"""The pure parts of the ACP backend: how a turn's end becomes its result, how a permission
request is answered. No process, no Trio."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive.acp import AgentExited
from hive.acp._outcome import ending
from hive.acp._permission import answer_permission
from hive.acp._schema import PermissionOption, RequestPermissionRequest, SelectedOutcome
from hive.runtime import Config, Permission, StdioServer, StopReason
from tests.helpers.strategies import prompt_answers, prompt_failures


@given(
    stop_reason=st.sampled_from(StopReason),
    answer=prompt_answers,
    failure=prompt_failures,
    killed=st.booleans(),
    tool_running=st.booleans(),
    before_prompt=st.none() | st.just("the ACP agent to answer session/new"),
)
def test_every_ending_is_one_well_formed_result(
    stop_reason: StopReason,
    answer: Any,
    failure: Exception | None,
    killed: bool,
    tool_running: bool,
    before_prompt: str | None,
) -> None:
    end = ending(
        stop_reason, answer, failure, killed=killed, tool_running=tool_running, before_prompt=before_prompt
    )
    stopped = stop_reason in (StopReason.CANCELLED, StopReason.IDLE)
    assert end.is_error == (end.subtype != "success")
    assert bool(end.errors) == end.is_error
    if stopped:
        assert end.is_error  # a stopped turn never reads as a success
    if before_prompt is not None:
        assert end.errors is not None and before_prompt in end.errors[0]
        assert end.hive is not None and end.hive["synthesized"]
    if killed and stopped:
        assert end.errors is not None and "SIGINT" in end.errors[0]
    if end.hive is not None:
        assert end.hive["stop_reason"] == stop_reason.value
    if stopped and before_prompt is None and end.terminal_reason != "model_error":
        assert end.terminal_reason == ("aborted_tools" if tool_running else "aborted_streaming")


def test_an_answer_to_a_completed_turn_is_the_agents_own() -> None:
    end = ending(StopReason.COMPLETED, {"stopReason": "end_turn"}, None, killed=False, tool_running=False)
    assert (end.subtype, end.is_error, end.terminal_reason, end.hive) == ("success", False, "completed", None)


def test_an_agent_killed_after_a_cancel_is_a_cancelled_turn_not_a_crash() -> None:
    end = ending(StopReason.CANCELLED, None, AgentExited(130, ""), killed=True, tool_running=True)
    assert end.errors == ["the turn was cancelled; the agent did not answer and was sent SIGINT"]
    assert end.terminal_reason == "aborted_tools"


OPTIONS = [
    PermissionOption("yes", "Allow", "allow_once"),
    PermissionOption("always", "Always", "allow_always"),
    PermissionOption("no", "Reject", "reject_once"),
]


def request(tool_call: dict[str, Any], options: list[PermissionOption] = OPTIONS) -> RequestPermissionRequest:
    return RequestPermissionRequest("s", tool_call, options)


@pytest.mark.parametrize(
    ("permission", "kind", "chosen"),
    [
        (Permission.DEFAULT, "edit", "no"),
        (Permission.DEFAULT, "execute", "no"),
        (Permission.ACCEPT_EDITS, "edit", "yes"),
        (Permission.ACCEPT_EDITS, "execute", "no"),
        (Permission.ALLOW, "execute", "yes"),
    ],
)
def test_the_policy_picks_the_option(permission: Permission, kind: str, chosen: str) -> None:
    answer = answer_permission(
        request({"toolCallId": "t", "kind": kind}), Config(permission=permission), cancelling=False
    )
    assert answer.outcome == SelectedOutcome(chosen)


def test_hives_own_servers_and_allowed_tools_are_allowed_under_every_policy() -> None:
    config = Config(mcp_servers=(StdioServer("bash", "hive-bash-mcp"),), allowed_tools=("Read",))
    for name in ("mcp__bash__run", "Read"):
        tool = {"toolCallId": "t", "kind": "execute", "_meta": {"claudeCode": {"toolName": name}}}
        assert answer_permission(request(tool), config, cancelling=False).outcome == SelectedOutcome("yes")
    other = {"toolCallId": "t", "_meta": {"claudeCode": {"toolName": "mcp__bashful__run"}}}
    assert answer_permission(request(other), config, cancelling=False).outcome == SelectedOutcome("no")


def test_no_fitting_option_or_a_cancel_under_way_answers_cancelled() -> None:
    only_allow = [PermissionOption("yes", "Allow", "allow_once")]
    assert (
        answer_permission(request({}, only_allow), Config(), cancelling=False).outcome.outcome == "cancelled"
    )
    allowing = Config(permission=Permission.ALLOW)
    assert answer_permission(request({}), allowing, cancelling=True).outcome.outcome == "cancelled"
