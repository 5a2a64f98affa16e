"""The fake Messages API's ``rules``: one scenario file scripts a session whose turns differ by
their prompt (a tool turn, then a text turn after a wake), with no rewrite between turns.

In-process, over the fake's planning functions and requests shaped as the Claude Code CLI sends
them; ``tests/real/test_real_agent.py`` plays the same kind of file to the real CLI."""

from __future__ import annotations

from typing import Any

from fixtures.fake_anthropic_api import choose_rule, plan_answer, turn_prompt

SESSION: dict[str, Any] = {
    "text": "No rule for that.",
    "rules": [
        {
            "when": {"prompt_contains": "start the build"},
            "mode": "tool",
            "preface": "",
            "tool": "mcp__bash__run",
            "input": {"cmd": "make", "name": "build", "wait_seconds": 0},
            "after_tool_text": "The build is running.",
        },
        {"when": {"prompt_regex": r"^\[wake from bash-task-build\]"}, "text": "The build is done."},
    ],
}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def answer(messages: list[dict[str, Any]], step: int) -> tuple[int | None, list[dict[str, Any]], str | None]:
    """Which rule answers the request with ``messages`` (``step`` answers into its turn), what it
    sends, and any rule error."""
    scenario, rule, error = choose_rule(SESSION, turn_prompt(messages))
    return rule, plan_answer(scenario, "main", step).blocks, error


def test_a_tool_turn_then_a_woken_text_turn_from_one_file() -> None:
    reminder = text("<system-reminder>\nToday's date is 2026-12-05.\n</system-reminder>")
    conversation = [user(reminder, text("[message from operator]\nstart the build"))]

    rule, blocks, error = answer(conversation, 0)
    assert (rule, error) == (0, None)
    (use,) = blocks
    assert (use["type"], use["name"], use["input"]["name"]) == ("tool_use", "mcp__bash__run", "build")

    # The request after the tool's result belongs to the same turn: the same rule closes it.
    conversation += [
        {"role": "assistant", "content": blocks},
        user({"type": "tool_result", "tool_use_id": use["id"], "content": "task started: id=build"}),
    ]
    rule, blocks, _ = answer(conversation, 1)
    assert (rule, blocks) == (0, [text("The build is running.")])

    # The wake's turn, in the same session: its prompt picks the second rule.
    conversation += [
        {"role": "assistant", "content": blocks},
        user(text("[wake from bash-task-build]\nbash task build ended: done, exit 0"), reminder),
    ]
    rule, blocks, _ = answer(conversation, 0)
    assert (rule, blocks) == (1, [text("The build is done.")])

    # A prompt no rule holds for gets the top level.
    rule, blocks, _ = answer([user(text("hello"))], 0)
    assert (rule, blocks) == (None, [text("No rule for that.")])


def test_the_prompt_is_the_turns_own_text_without_reminders() -> None:
    messages = [
        user(text("<system-reminder>run the tests</system-reminder>"), text("say hi")),
        {"role": "assistant", "content": [text("hi")]},
        user({"type": "tool_result", "tool_use_id": "t", "content": "start the build"}),
    ]
    assert turn_prompt(messages) == "say hi"
    assert turn_prompt([{"role": "user", "content": "plain string"}]) == "plain string"
    assert turn_prompt([]) == ""


def test_conditions_all_hold_and_the_first_rule_that_holds_answers() -> None:
    scenario = {
        "text": "top",
        "rules": [
            {"when": {"prompt_contains": "a", "prompt_regex": "b$"}, "text": "both"},
            {"when": {"prompt_contains": "a"}, "text": "a alone"},
            {"text": "always"},
        ],
    }
    assert choose_rule(scenario, "a then b") == ({"text": "both"}, 0, None)
    assert choose_rule(scenario, "b then a") == ({"text": "a alone"}, 1, None)
    assert choose_rule(scenario, "neither") == ({"text": "always"}, 2, None)
    assert choose_rule({"text": "top"}, "anything") == ({"text": "top"}, None, None)


def test_a_rule_that_cannot_be_used_is_reported_and_the_top_level_answers() -> None:
    for rules, said in [
        ([{"when": {"prompt_regex": "("}, "text": "never"}], "rules[0]: prompt_regex: missing ),"),
        ([{"when": {"prompt_starts": "x"}}], "rules[0]: unknown condition 'prompt_starts'"),
        ([{"when": "x"}], "rules[0]: its when is not a JSON object"),
        (["x"], "rules[0]: not a JSON object"),
        ({"when": {}}, "rules is not a list"),
    ]:
        scenario, rule, error = choose_rule({"text": "top", "rules": rules}, "x")
        assert (scenario, rule) == ({"text": "top"}, None)
        assert error is not None and error.startswith(said), error
    # Rules are read in order: one that holds before the bad one answers.
    rules = [{"when": {"prompt_contains": "x"}, "text": "first"}, "bad"]
    assert choose_rule({"text": "top", "rules": rules}, "x") == ({"text": "first"}, 0, None)
    assert choose_rule({"text": "top", "rules": rules}, "y") == (
        {"text": "top"},
        None,
        "rules[1]: not a JSON object",
    )
