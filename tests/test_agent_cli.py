"""``hive agent`` in-process (issue 22): the flags that find the agent, the prompt's sources and
refusals, the status for a person, and the turn log as `log` and `log --follow` show it; and
`log --follow` as a process, stopped by SIGINT."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from hive._lines import MAX_LINE
from hive._state_dir import lock_state_dir
from hive._text_input import TextRefused
from hive._when import span
from hive.agent import LogRenderer, parse_options, render_log
from hive.agent_socket import AgentStatus, DaemonHealth
from hive.cli import build_parser, main
from hive.cli._agent import _agent_socket, prompt_text
from hive.cli._agent_start import SPAWN_WAIT, STARTING_WAIT, StartWaits
from hive.cli._agent_status import describe_status
from tests.helpers.processes import receive_until, started_ignoring_sigint

SUBCOMMANDS = ("status", "prompt", "compact", "log")
OVER_SOCKET = ("status", "prompt", "compact")


def agent_args(*argv: str) -> argparse.Namespace:
    return build_parser("agent").parse_args(["agent", *argv])


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def no_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HIVE_STATE_DIR", "HIVE_AGENT_SOCKET", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse wraps its help to the terminal, breaking after hyphens: not here."""
    monkeypatch.setenv("COLUMNS", "1000")


# -- item 1: --state-dir everywhere, the socket in it -----------------------------------------------


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_agent_subcommand_takes_state_dir(command: str) -> None:
    args = agent_args(command, "--state-dir", "/agents/scribe", *(["hi"] if command == "prompt" else []))
    assert args.state_dir == "/agents/scribe"


@pytest.mark.usefixtures("no_agent_env")
@pytest.mark.parametrize(
    ("env", "flags"),
    [
        ({}, ()),
        ({}, ("--state-dir", "/agents/scribe")),
        ({"XDG_STATE_HOME": "/xdg"}, ()),
        ({"HIVE_STATE_DIR": "/env"}, ()),
        ({"HIVE_STATE_DIR": "/env"}, ("--state-dir", "/agents/scribe")),
        ({"HIVE_AGENT_SOCKET": "/run/a.sock"}, ("--state-dir", "/agents/scribe")),
    ],
)
def test_the_cli_finds_the_socket_where_hive_agent_puts_it(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], flags: tuple[str, ...]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    served = parse_options(list(flags), env=env).agent_socket
    for command in OVER_SOCKET:
        args = agent_args(command, *flags, *(["hi"] if command == "prompt" else []))
        assert _agent_socket(args).absolute() == served
    assert _agent_socket(agent_args("status", *flags, "--socket", "/s.sock")) == Path("/s.sock")


@pytest.mark.usefixtures("no_agent_env")
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_each_subcommands_help_names_its_defaults(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["agent", command, "--help"])
    shown = one_line(capsys.readouterr().out)
    assert "--state-dir DIR" in shown
    assert "[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive, else ~/.local/state/hive: here" in shown
    assert str(Path.home() / ".local" / "state" / "hive") in shown
    if command in OVER_SOCKET:
        assert "[HIVE_AGENT_SOCKET; default <state-dir>/agent.sock]" in shown
    else:
        assert "--socket" not in shown


# -- item 14: every positional has a help text ------------------------------------------------------


def test_every_positional_of_hive_agent_has_help() -> None:
    agent = subparsers(build_parser("agent"))["agent"]
    positionals = [
        (name, action)
        for name, parser in subparsers(agent).items()
        for action in parser._actions
        if not action.option_strings
    ]
    assert positionals, "hive agent prompt TEXT at least"
    for name, action in positionals:
        assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


# -- items 5, 6 and 8: the prompt ---------------------------------------------------------------------


def test_the_words_of_an_unquoted_prompt_are_joined_with_one_space() -> None:
    args = agent_args("prompt", "look", "at", "the", "test")
    assert prompt_text(args.text, args.file) == "look at the test"
    assert prompt_text(["  keep   its\nspacing "], None) == "  keep   its\nspacing "


def test_the_prompts_help_says_how_to_send_past_linuxs_limit_on_an_argument(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["agent", "prompt", "--help"])
    shown = one_line(capsys.readouterr().out)
    assert "one argument is limited to 128 KiB by Linux" in shown
    assert "- to read it from stdin" in shown
    assert "--file FILE" in shown


def test_a_prompt_past_linuxs_limit_on_an_argument_comes_from_stdin_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    big = "the first words " + "é" * (100 * 1024) + " the last words"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(big.encode())))
    assert prompt_text(["-"], None) == big
    (tmp_path / "prompt").write_text(big)
    assert prompt_text([], str(tmp_path / "prompt")) == big


def prompt_to_nowhere(tmp_path: Path, *argv: str) -> int:
    return main(["agent", "prompt", "--socket", str(tmp_path / "nobody.sock"), *argv])


def test_a_prompt_over_the_sockets_cap_is_refused_with_the_cap_and_the_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "prompt"
    path.write_bytes(b"x" * (MAX_LINE - 100))  # fits: sent (to no agent here)
    args = agent_args("prompt", "--socket", str(tmp_path / "nobody.sock"), "--file", str(path))
    args.waits = StartWaits(spawn=0)  # no hive-agent is starting: none is waited for
    assert args.handler(args) == 1
    assert "no agent socket at" in capsys.readouterr().err
    # Past the cap as it is read (the file is read only to one byte past it) ...
    path.write_bytes(b"x" * (MAX_LINE + 1))
    assert prompt_to_nowhere(tmp_path, "--file", str(path)) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"hive: the message from --file {path} is over the cap of 1 MiB (1,048,576 bytes)")
    assert "put the text in a file the agent can read and send a message that names the file" in said
    # ... or once its JSON escapes are counted in the request.
    path.write_bytes(b'"' * 600_000)
    assert prompt_to_nowhere(tmp_path, "--file", str(path)) == 2
    said = capsys.readouterr().err
    assert said.startswith("hive: the message is too long: its request to the agent socket would be 1,200,0")
    assert "at most 1,048,576 bytes (1 MiB) a request, JSON escapes counted" in said
    assert "put the text in a file the agent can read and send a message that names the file" in said


def test_a_prompt_to_a_harness_that_holds_the_lock_but_serves_no_socket_says_so_after_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = agent_args("prompt", "--state-dir", str(tmp_path), "hello")
    assert args.waits == StartWaits(spawn=SPAWN_WAIT, starting=STARTING_WAIT)
    args.waits = StartWaits(spawn=SPAWN_WAIT, starting=0.2)  # the bound, not a wait for anything
    with lock_state_dir(tmp_path, "agent.lock", holder="hive-agent"):  # a harness, starting
        assert args.handler(args) == 1
    said = capsys.readouterr().err
    assert (
        f"hive-agent (pid {os.getpid()}) holds {tmp_path} but did not serve {tmp_path / 'agent.sock'}" in said
    )


@pytest.mark.parametrize("words", [[""], ["   "], [" \n\t", ""], []])
def test_an_empty_or_blank_prompt_is_refused_and_nothing_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    assert prompt_to_nowhere(tmp_path, *words) == 2
    said = capsys.readouterr().err
    assert "no agent socket" not in said  # refused before anything was sent
    expected = "no message: give it as words" if not words else "the message is empty (or only blanks)"
    assert said.startswith(f"hive: {expected}"), said


def test_a_blank_prompt_from_stdin_or_a_file_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b" \n\n")))
    with pytest.raises(TextRefused, match="empty"):
        prompt_text(["-"], None)
    (tmp_path / "prompt").write_text("")
    with pytest.raises(TextRefused, match="empty"):
        prompt_text([], str(tmp_path / "prompt"))
    with pytest.raises(TextRefused, match="cannot read --file"):
        prompt_text([], str(tmp_path / "missing"))
    with pytest.raises(TextRefused, match="give the message one way"):
        prompt_text(["hi"], str(tmp_path / "prompt"))


# -- item 2: the status, as it is ---------------------------------------------------------------------

NOW = time.mktime((2026, 12, 5, 10, 0, 0, 0, 0, -1))


def status(**fields: Any) -> AgentStatus:
    return AgentStatus(**{"state": "idle", **fields})


def test_status_during_a_turn_names_it_and_since_when_then_the_last_that_ended() -> None:
    lines = describe_status(
        status(
            state="turn",
            carrying=1,
            turns=5,
            running_turn=5,
            running_since=NOW - 12,
            last_turn=4,
            last_kind="turn",
            last_stop_reason="completed",
            last_started=NOW - 200,
            last_ended=NOW - 180,
        ),
        NOW,
    )
    assert lines[0] == "agent: in turn 5 for 12 s (since 09:59:48), carrying 1 message"
    assert "last ended: turn 4, completed, at 09:57:00 (3 min 0 s ago), after 20 s" in lines


def test_status_during_the_first_turn_has_no_last_turn() -> None:
    lines = describe_status(
        status(state="turn", carrying=2, turns=1, running_turn=1, running_since=NOW - 3.25), NOW
    )
    assert lines[0] == "agent: in turn 1 for 3.2 s (since 09:59:56), carrying 2 messages"
    assert lines[-1] == "last ended: none yet"


def test_status_of_a_compaction_and_of_an_idle_agent_after_a_restart() -> None:
    compacting = describe_status(status(state="compacting", running_turn=7, running_since=NOW - 90), NOW)
    assert compacting[0] == "agent: compacting its session: compaction 7 for 1 min 30 s (since 09:58:30)"
    yesterday = NOW - 86400 - 7200
    lines = describe_status(
        status(
            turns=6,
            last_turn=6,
            last_kind="compact",
            last_stop_reason="failed",
            last_error="the agent went away",
            last_started=yesterday - 4,
            last_ended=yesterday,
        ),
        NOW,
    )
    assert lines[0] == "agent: idle"
    assert lines[-2] == (
        f"last ended: compaction 6, failed, at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(yesterday))} "
        "(1 d 2 h ago), after 4.0 s"
    )
    assert lines[-1] == "last error: the agent went away"


def test_spans_read_as_a_person_says_them() -> None:
    assert [span(s) for s in (-1, 0.25, 9.96, 42, 185, 7500, 200_000)] == [
        "0.0 s",
        "0.2 s",
        "10 s",
        "42 s",
        "3 min 5 s",
        "2 h 5 min",
        "2 d 7 h",
    ]


# -- item 3: the turn log, read whole or followed -------------------------------------------------


def start(turn: int, **fields: Any) -> dict[str, Any]:
    carried = [{"seq": turn, "kind": "prompt", "from": "operator", "body": f"message {turn}"}]
    return {"type": "hive_start", "turn": turn, "kind": "turn", "started": NOW, "carried": carried, **fields}


def end(turn: int, **fields: Any) -> dict[str, Any]:
    return {**start(turn), "type": "hive", "ended": NOW + 2.5, "outcome": "completed", **fields}


def said(text: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}


def followed(objects: list[dict[str, Any]]) -> list[list[str]]:
    """What a follower prints as each object of the log comes."""
    renderer = LogRenderer()
    return [renderer.feed(obj) for obj in objects]


def test_a_followed_turn_shows_its_message_first_then_its_stream_as_it_comes_then_its_end() -> None:
    log = [start(1), said("first"), said("second"), end(1), start(2), said("third"), end(2)]
    steps = followed(log)
    header = f"── turn 1 · {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(NOW))}"
    assert steps[0] == [header, "   message from operator: message 1"]
    assert steps[1:3] == [["   agent: first"], ["   agent: second"]]
    assert steps[3] == ["   ended: completed · 2.5 s", ""]
    # The same lines as the log read whole, each once.
    assert [line for step in steps for line in step] == list(render_log(log))


@pytest.mark.parametrize(
    "log",
    [
        # Written before the start lines: each turn's stream is held until its end.
        [said("a"), end(1), said("b"), said("c"), end(2, outcome="failed", error="boom")],
        # hive-agent died during turn 1 (a start, no end), and numbered on from it.
        [start(1), said("a"), start(2), said("b"), end(2)],
        # A compaction between turns, and a turn that could not start.
        [
            start(1),
            end(1),
            start(2, kind="compact", carried=[], requested_by="agent"),
            end(2, kind="compact"),
            start(3),
            end(3, outcome="not started", delivered=False),
        ],
    ],
)
def test_follow_and_log_show_every_shape_of_log_alike(log: list[dict[str, Any]]) -> None:
    assert [line for step in followed(log) for line in step] == list(render_log(log))


def test_a_turn_that_never_ended_is_said_to_have_never_ended() -> None:
    lines = list(render_log([start(1), said("a"), start(2), said("b"), end(2)]))
    assert lines[:4] == [
        lines[0],
        "   message from operator: message 1",
        "   agent: a",
        "   ended: never: hive-agent stopped before the turn's end was written",
    ]
    assert lines[5].startswith("── turn 2 · ")


def test_a_log_read_whole_during_a_turn_shows_it_so_far() -> None:
    lines = list(render_log([start(1), end(1), start(2), said("working")]))
    assert lines[-4].startswith("── turn 2 · ")
    assert lines[-3:] == [
        "   message from operator: message 2",
        "   agent: working",
        "   … no end yet: the turn is running (or hive-agent died during it)",
    ]


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_an_empty_turn_log_says_so_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    (tmp_path / "turns.jsonl").write_bytes(b"")
    assert main(["agent", "log", "--state-dir", str(tmp_path), *flags]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"hive: the turn log {tmp_path / 'turns.jsonl'} is empty: no turn has started yet\n"


def test_no_turn_log_at_all_says_so_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "log", "--state-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"hive: no turn log at {tmp_path / 'turns.jsonl'}: no hive-agent has run")


@pytest.mark.parametrize(
    "argv", [["agent", "status", "--bogus"], ["agent", "log", "--nope", "x"], ["bash", "ls", "--bogus"]]
)
def test_an_unknown_flag_is_told_with_its_own_commands_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    command = " ".join(argv[:2])
    assert err.startswith(f"usage: hive {command} "), err
    assert f"hive {command}: error: unrecognized arguments: {' '.join(argv[2:])}" in err


def test_status_says_what_the_last_turn_cost_and_the_session_so_far() -> None:
    tokens = {"input_tokens": 200, "cache_read_input_tokens": 41_000, "output_tokens": 310}
    lines = describe_status(
        status(
            turns=4,
            last_turn=4,
            last_kind="turn",
            last_stop_reason="completed",
            last_cost_usd=0.0123,
            last_tokens=tokens,
            session_cost_usd=0.4567,
        ),
        NOW,
    )
    assert lines[-1] == "cost: $0.0123 the last turn (41,200 tokens in, 310 out); $0.4567 the session so far"


def test_status_says_a_supervised_daemon_is_down_and_when_it_is_started_again() -> None:
    lines = describe_status(
        status(
            bash_daemon=DaemonHealth(
                "down", NOW - 3, restarts=1, last_exit="killed by SIGKILL", restart_at=NOW + 1
            ),
            subagent_daemon=DaemonHealth(
                "running", NOW - 60, 4242, restarts=1, last_exit="exited with status 1"
            ),
        ),
        NOW,
    )
    assert (
        lines[-2]
        == "bash daemon: DOWN since 09:59:57 (killed by SIGKILL); hive-agent starts it again in 1.0 s"
    )
    assert lines[-1] == "subagent daemon: running (pid 4242), started again 1 time, last exited with status 1"
    assert not any("daemon" in line for line in describe_status(status(), NOW))


LOG_FOLLOW = ("agent", "log", "--follow", "--state-dir")


async def test_log_follow_started_with_sigint_ignored_still_stops_on_sigint(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "hive.cli", *LOG_FOLLOW, str(tmp_path)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    async with started_ignoring_sigint(argv, **pipes) as follower:
        assert follower.stdout is not None and follower.stderr is not None
        async with follower.stdout, follower.stderr:
            with trio.fail_after(30):
                # following: it waits for the first turn
                told = await receive_until(follower.stderr, lambda told: told.endswith(b"\n"))
                assert b"waiting for the first (Ctrl-C to stop)" in told
                follower.send_signal(signal.SIGINT)
                assert await follower.wait() == 0
