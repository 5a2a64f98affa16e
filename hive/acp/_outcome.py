"""How an ACP turn ended, as the ``result`` line it gets: a pure function of what happened.

No I/O and no Trio: the turn's driver gathers what happened (why it stopped, the prompt's
answer or failure, whether the agent was sent SIGINT) and writes the ``Ending`` it gets
here through the translator.
"""

from __future__ import annotations

from typing import Any

import attrs

from hive.acp._errors import JsonRpcError
from hive.acp._schema import JsonObject, PromptResponse, SchemaError, from_wire
from hive.runtime import StopReason

CANCELLED_ERRORS = frozenset({-32603, -32800})
"""Answers to a cancelled prompt that mean "cancelled" (CLIENTS.md: agents send these)."""


@attrs.frozen
class Ending:
    """The fields of a turn's ``result`` line, for ``Translator.finish`` to write."""

    subtype: str
    is_error: bool
    stop_reason: str | None
    terminal_reason: str | None
    tokens: JsonObject | None = None
    errors: list[str] | None = None
    hive: JsonObject | None = None


def ending(
    stop_reason: StopReason,
    answer: Any,
    failure: Exception | None,
    *,
    killed: bool,
    tool_running: bool,
    before_prompt: str | None = None,
) -> Ending:
    """The result of a turn that ended for ``stop_reason`` with the prompt's ``answer`` (or its
    ``failure``). ``killed``: the agent was sent SIGINT. ``tool_running``: a tool call was
    running when the stop began. ``before_prompt``: the turn was stopped before its prompt
    was sent, while waiting for this."""
    stopped = stop_reason in (StopReason.CANCELLED, StopReason.IDLE)
    terminal = "aborted_tools" if tool_running else "aborted_streaming"
    sigint = "; the agent was sent SIGINT" if killed else ""
    if before_prompt is not None:
        return Ending(
            "error_during_execution",
            True,
            None,
            "aborted_streaming",
            errors=[f"the turn was {_stopped(stop_reason)} while waiting for {before_prompt}{sigint}"],
            hive={"synthesized": True, "stop_reason": stop_reason.value, "killed": killed},
        )
    if answer is not None and failure is None:
        try:
            response: PromptResponse = from_wire(answer, PromptResponse)
        except SchemaError as exc:
            failure = exc
        else:
            if stopped or response.stop_reason == "cancelled":
                # An agent may answer a cancelled prompt with end_turn (CLIENTS.md): it was cancelled.
                return Ending(
                    "error_during_execution",
                    True,
                    None,
                    terminal,
                    tokens=response.usage,
                    errors=["the turn was cancelled" + sigint],
                )
            if response.stop_reason == "max_turn_requests":
                return Ending(
                    "error_max_turns",
                    True,
                    response.stop_reason,
                    "max_turns",
                    tokens=response.usage,
                    errors=["the agent reached its limit of model requests for one turn"],
                )
            return Ending("success", False, response.stop_reason, "completed", tokens=response.usage)
    cancelled_answer = isinstance(failure, JsonRpcError) and failure.code in CANCELLED_ERRORS
    if stopped and (failure is None or cancelled_answer or killed):
        # Killed: whatever the agent's end said (its exit, most often), the stop is what ended it.
        return Ending(
            "error_during_execution",
            True,
            None,
            terminal,
            errors=[
                "the turn was cancelled"
                + ("; the agent did not answer and was sent SIGINT" if killed else "")
            ],
            hive={"synthesized": True, "stop_reason": stop_reason.value, "killed": killed}
            if killed
            else None,
        )
    return Ending(
        "error_during_execution",
        True,
        None,
        "model_error",
        errors=[str(failure) if failure is not None else "the agent gave no answer"],
        hive={"synthesized": True, "stop_reason": stop_reason.value},
    )


def _stopped(stop_reason: StopReason) -> str:
    return "stopped by the idle watchdog" if stop_reason is StopReason.IDLE else "cancelled"
