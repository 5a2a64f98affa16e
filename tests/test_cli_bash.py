"""``hive bash``'s logic in-process: the parser, reading the command, the socket it asks, the exit
status an answer makes and what it tells the operator. (``test_cli.py`` runs the real CLI against
a real daemon where a process is the point.)"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._limits import MAX_CMD_BYTES, MAX_WAIT
from hive._text_input import TextRefused, TextTooLong
from hive.bash.client import CallResult
from hive.cli import build_parser, for_operator
from hive.cli._bash import bash_socket, read_command
from hive.cli._bash_answer import exit_status
from hive.cli._types import capped_wait
from hive.errors import BadInput

SUBCOMMANDS = {
    "run": ["true"],
    "status": ["x"],
    "stop": ["x"],
    "ls": [],
}


def unwrapped(text: str) -> str:
    """Help text with no whitespace at all: argparse wraps it at any space or hyphen."""
    return "".join(text.split())


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("bash").parse_args(["bash", *argv])


def bash_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each ``hive bash`` subcommand's parser, by name."""
    top = build_parser("bash")
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    (bash_commands,) = [
        a for a in commands.choices["bash"]._actions if isinstance(a, argparse._SubParsersAction)
    ]
    return dict(bash_commands.choices)


# -- the command: words, `-`, --file (issue 22, item 6) ------------------------------------------


def test_several_words_are_joined_with_one_space_as_ssh_joins_them() -> None:
    args = parse("run", "echo", "a  b", "c", "--wait", "1")
    assert args.cmd == ["echo", "a  b", "c"]
    assert read_command(args.cmd, args.file, None) == "echo a  b c"
    # Words that start with '-' come after `--`; flags before it are still hive's.
    args = parse("run", "--wait", "1", "--", "ls", "-la")
    assert (args.cmd, args.wait) == (["ls", "-la"], 1.0)
    assert read_command(args.cmd, args.file, None) == "ls -la"


def test_a_word_run_does_not_take_is_refused_saying_where_flags_and_words_go(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["run", "ls", "-la"], ["run", "echo", "--wait", "3", "hi"]):
        with pytest.raises(SystemExit) as refused:
            parse(*argv)
        assert refused.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("usage: hive bash run ")
        assert (
            "`--` before a command that has a word starting with '-' (`hive bash run --wait 5 -- ls -la`)"
            in err
        )
    with pytest.raises(SystemExit):
        parse("status", "x", "y")
    assert "hive bash status: error: unrecognized arguments: y\n" in capsys.readouterr().err


def test_a_lone_dash_or_file_dash_reads_the_command_from_stdin_as_it_is() -> None:
    script = b"for i in 1 2; do\n  echo \xc3\xa9$i\ndone\n"
    for argv in (["run", "-"], ["run", "--file", "-"]):
        args = parse(*argv)
        assert read_command(args.cmd, args.file, io.BytesIO(script)) == script.decode()
    # `-` among other words is a word of the command.
    args = parse("run", "echo", "-")
    assert read_command(args.cmd, args.file, io.BytesIO(b"unread")) == "echo -"


def test_a_file_holds_a_command_past_the_argument_limit_up_to_the_cap(tmp_path: Path) -> None:
    """Linux refuses one argument over 128 KiB; --file and stdin take up to the tools' 1 MiB."""
    command = "true\n" + "#" * (MAX_CMD_BYTES - 6) + "\n"
    assert len(command.encode()) == MAX_CMD_BYTES
    path = tmp_path / "big.sh"
    path.write_text(command)
    args = parse("run", "--file", str(path))
    assert read_command(args.cmd, args.file, None) == command
    assert read_command(["-"], None, io.BytesIO(command.encode())) == command


def test_a_command_over_the_cap_is_refused_saying_the_cap_and_stdin_is_not_read_past_it(
    tmp_path: Path,
) -> None:
    over = b"x" * (MAX_CMD_BYTES + 1)
    endless = io.BytesIO(over * 3)
    with pytest.raises(TextTooLong) as on_stdin:
        read_command(["-"], None, endless)
    assert endless.tell() == MAX_CMD_BYTES + 1
    path = tmp_path / "big.sh"
    path.write_bytes(over)
    with pytest.raises(TextTooLong) as in_file:
        read_command([], str(path), None)
    # Words may add up past the cap though none is over Linux's limit on one.
    words = ["y" * 100_000] * 11
    with pytest.raises(TextTooLong) as as_words:
        read_command(words, None, None)
    for refused in (on_stdin, in_file, as_words):
        message = str(refused.value)
        assert "over the cap of 1 MiB (1,048,576 bytes)" in message
        assert "`hive bash run bash FILE`" in message
        assert refused.value.exit_code == 2
    assert str(path) in str(in_file.value)
    assert "stdin" in str(on_stdin.value)
    assert f"is {len(' '.join(words)):,} bytes" in str(as_words.value)


def test_no_command_two_commands_or_one_that_cannot_be_read_is_bad_input(tmp_path: Path) -> None:
    cases: list[tuple[type[BadInput], list[str], str | None, bytes | None, str]] = [
        (TextRefused, [], None, None, "no command: give it as words"),
        (TextRefused, ["echo"], "f.sh", None, "give the command one way"),
        (TextRefused, ["-"], None, b" \n\t", "the command is empty (or only blanks): give the shell command"),
        (TextRefused, ["-"], None, b"echo \xff", "is not UTF-8 text"),
        (TextRefused, [], str(tmp_path / "absent.sh"), None, "No such file or directory"),
        (TextRefused, [], str(tmp_path), None, "Is a directory"),
        (TextRefused, ["-"], None, None, "- reads the command from stdin, and there is none"),
    ]
    for kind, words, file, stdin, says in cases:
        with pytest.raises(kind) as refused:
            read_command(words, file, io.BytesIO(stdin) if stdin is not None else None)
        assert says in str(refused.value), (words, file, stdin)
        assert refused.value.exit_code == 2


@given(st.binary(max_size=64))
def test_any_bytes_on_stdin_are_the_command_or_bad_input(data: bytes) -> None:
    try:
        cmd = read_command(["-"], None, io.BytesIO(data))
    except BadInput as refused:
        assert str(refused)
    else:
        assert cmd.encode() == data and cmd.strip()


def test_run_help_says_the_argument_limit_and_names_stdin_and_file() -> None:
    text = unwrapped(bash_parsers()["run"].format_help())
    for says in (
        "Linux limits one argument to 128 KiB: for a longer command, up to 1 MiB (1,048,576 bytes), "
        "use `-` or --file",
        "A lone `-` reads it from stdin",
        "joined with one space, as ssh joins them: quote the command to keep it as written",
    ):
        assert unwrapped(says) in text


# -- the exit status (item 7) ---------------------------------------------------------------------


def status(state: str, exit_code: int | None = None, **more: Any) -> CallResult:
    return CallResult(f"task t: {state}", {"id": "t", "state": state, "exit_code": exit_code, **more})


def test_a_final_state_is_the_exit_status_a_task_still_running_is_0() -> None:
    assert exit_status(status("done", 0)) == 0
    assert exit_status(status("done", 3)) == 3
    assert exit_status(status("done", 255)) == 255
    assert exit_status(status("running")) == 0
    assert exit_status(status("pending")) == 0
    assert exit_status(status("timed_out", 130)) == 124
    assert exit_status(status("stopped", 130)) == 125
    assert exit_status(status("interrupted")) == 75
    started = CallResult("task started: id=t", {"id": "t", "state": "running", "stdout_path": "/o"})
    assert exit_status(started) == 0


def test_hives_own_failures_are_1_bad_input_2_and_an_unknown_state_none() -> None:
    def error(kind: str) -> CallResult:
        return CallResult("no", {"error": kind, "message": "no"}, is_error=True)

    assert exit_status(error("BadArgument")) == 2
    assert exit_status(error("UnknownTask")) == 1
    assert exit_status(error("NameBusy")) == 1
    assert exit_status(status("paused")) is None
    assert exit_status(status("done", None)) is None
    assert exit_status(status("done", 256)) is None


def test_a_wait_over_the_cap_is_the_cap_with_a_note() -> None:
    assert capped_wait(0) == (0, None)
    assert capped_wait(MAX_WAIT) == (MAX_WAIT, None)
    seconds, note = capped_wait(100)
    assert seconds == MAX_WAIT
    assert note == "--wait 100 is over the cap of 30 s: waiting 30 s at most"
    assert parse("status", "x", "--wait", "100").wait == 100  # the flag takes it; the handler caps it


def test_the_help_gives_the_exit_status_table() -> None:
    for name in ("run", "status"):
        text = bash_parsers()[name].format_help()
        for row in ("0-255  the task is done: its own exit status", "124    the task timed out"):
            assert row in text
        assert "125    the task was stopped" in text
        assert "75     the task was interrupted" in text


# -- whether the end wakes the agent (item 10) -----------------------------------------------------


def test_a_started_task_says_whether_its_end_wakes_the_agent_as_the_answer_tells() -> None:
    """The daemon's answer names the wake (bash-task-x) or has none; the operator is told which."""
    answer = CallResult(
        "task started: id=x\nIt runs in the background; you will be woken by a message from bash-task-x "
        "when it ends. status('x', wait_seconds=30) waits for it, stop('x') ends it.\nstdout: /o\nstderr: /e",
        {
            "id": "x",
            "state": "running",
            "stdout_path": "/o",
            "stderr_path": "/e",
            "wake": "bash-task-x",
            "previous": {"id": "x", "state": "done", "exit_code": 3},
        },
    )
    assert for_operator(answer).splitlines() == [
        "(the previous task named x had ended: done, exit code 3)",
        "task started: id=x",
        "It runs in the background: `hive bash status x --wait 30` waits for it, `hive bash stop x` ends it.",
        "When it ends, the daemon sends its end to the agent as a wake from bash-task-x, which starts a "
        "turn.",
        "stdout: /o",
        "stderr: /e",
    ]
    quiet = CallResult("task started: id=x", {**answer.structured, "wake": None})
    assert for_operator(quiet).splitlines()[3] == (
        "The daemon has no agent socket: no agent is woken when it ends."
    )


def test_a_running_tasks_status_says_what_to_do_whether_it_wakes_and_keeps_its_output() -> None:
    agent_words = (
        "It runs in the background; you will be woken by a message from bash-task-x when it ends. "
        "status('x', wait_seconds=30) waits for it, stop('x') ends it."
    )
    answer = CallResult(
        "\n".join(
            [
                "task x: running for 1.00 s",
                "$ ./build.sh",
                agent_words,
                "--- stdout (40 bytes; whole output: /o) ---",
                agent_words,  # the task's own output, whatever it says, is shown as it is
                "--- stderr (0 bytes; whole output: /e) ---",
            ]
        ),
        {"id": "x", "state": "running", "stdout": {"tail": agent_words + "\n"}, "wake": "bash-task-x"},
    )
    assert for_operator(answer).splitlines() == [
        "task x: running for 1.00 s",
        "$ ./build.sh",
        "It runs in the background: `hive bash status x --wait 30` waits for it, `hive bash stop x` ends it.",
        "When it ends, the daemon sends its end to the agent as a wake from bash-task-x, which starts a "
        "turn.",
        "--- stdout (40 bytes; whole output: /o) ---",
        agent_words,
        "--- stderr (0 bytes; whole output: /e) ---",
    ]
    # A daemon that does not say (one older than `wake` in a status) is not guessed at.
    silent = CallResult(answer.text, {"id": "x", "state": "running"})
    assert "wake" not in for_operator(silent).lower()


# -- the state directory and the socket (item 1) --------------------------------------------------


def test_every_subcommand_takes_state_dir_and_the_socket_defaults_into_it() -> None:
    env = {"HIVE_STATE_DIR": "/env-state", "XDG_STATE_HOME": "/xdg", "HOME": "/home/op"}
    for name, rest in SUBCOMMANDS.items():
        given = parse(name, *rest, "--state-dir", "/flag-state")
        assert bash_socket(given, env) == Path("/flag-state/bash.sock")
        assert bash_socket(given, {**env, "HIVE_BASH_SOCKET": "/env.sock"}) == Path("/env.sock")
        flagged = parse(name, *rest, "--state-dir", "/flag-state", "--socket", "/flag.sock")
        assert bash_socket(flagged, {**env, "HIVE_BASH_SOCKET": "/env.sock"}) == Path("/flag.sock")
        plain = parse(name, *rest)
        assert bash_socket(plain, env) == Path("/env-state/bash.sock")
        assert bash_socket(plain, {"XDG_STATE_HOME": "/xdg"}) == Path("/xdg/hive/bash.sock")


def test_the_help_names_the_defaults() -> None:
    for name, parser in bash_parsers().items():
        text = unwrapped(parser.format_help())
        assert "--state-dirDIR" in text, name
        assert unwrapped("[HIVE_STATE_DIR; default $XDG_STATE_HOME/hive or ~/.local/state/hive]") in text, (
            name
        )
        assert unwrapped("[HIVE_BASH_SOCKET; default <state-dir>/bash.sock]") in text, name


# -- help for every positional (item 14) -----------------------------------------------------------


def test_every_positional_of_hive_bash_has_help() -> None:
    seen = []
    for name, parser in bash_parsers().items():
        for action in parser._actions:
            if not action.option_strings:
                assert action.help, (name, action.dest)
                seen.append((name, action.metavar))
    assert sorted(seen) == [("run", "CMD"), ("status", "ID"), ("stop", "ID"), ("tail", "ID")]
    for name in ("status", "stop", "tail"):
        assert unwrapped("the task's id, as `hive bash run` answered it, or the name given with --name") in (
            unwrapped(bash_parsers()[name].format_help())
        )
