"""The claude backend against the fake claude: every behaviour of STOPPING.md §8, and more.

Every stop test asserts, from the fake's own record, that only SIGINT was ever sent.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
import trio.testing

from fixtures import fake_claude
from hive.claude import _session
from hive.runtime import (
    SIGNALS_SENT,
    CompactionPolicy,
    HttpServer,
    IdleKilled,
    Permission,
    SessionNotFound,
    StdioServer,
    StopReason,
    TurnFailed,
)
from hive.sink import MemorySink, ResultMessage
from tests.helpers.claude_fake import FakeClaude, result_lines
from tests.helpers.processes import wait_exited
from tests.helpers.runtimes import run_and_cancel

GUARD = 30  # seconds: a hang fails the test instead of wedging the run


def sample(name: str) -> list[bytes]:
    path = Path(__file__).resolve().parent.parent / "fixtures" / "claude_samples" / name
    return [line for line in path.read_bytes().splitlines() if line.strip()]


# 1 -----------------------------------------------------------------------------------------------


async def test_a_normal_turn_passes_every_line_in_order_and_the_session_carries_on(fake: FakeClaude) -> None:
    fake.script([{"replay": "02_tool_turn_with_partial_messages.jsonl"}], [{"default_turn": True}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("list the files", sink)
            session = outcome.session_id
            second = await runtime.run("and now?", MemorySink())
    original = sample("02_tool_turn_with_partial_messages.jsonl")
    recorded = json.loads(original[0])["session_id"]
    assert session == fake.starts()[0]["session_id"]
    # Unchanged (the fake gives the replay its own session id), in order, nothing added.
    assert sink.lines() == [line.replace(recorded.encode(), session.encode()) for line in original]
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (
        StopReason.COMPLETED,
        False,
        False,
    )
    assert outcome.result == "Tool finished; all done."
    assert len(result_lines(sink.data)) == 1
    assert second.session_id == session
    first_argv, second_argv = (start["argv"] for start in fake.starts())
    assert not any(arg.startswith("--resume") for arg in first_argv)
    assert f"--resume={session}" in second_argv
    assert sink.usages and sink.usages[-1].size == 200000


# 2 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["04_error_max_turns.jsonl", "05_api_error_400.jsonl"])
async def test_an_error_result_then_exit_1_is_a_completed_turn_with_an_error(
    fake: FakeClaude, name: str
) -> None:
    fake.script([{"replay": name}, {"exit": 1}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (StopReason.COMPLETED, True, False)
    assert len(result_lines(sink.data)) == 1


# 3 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "says"),
    [
        ([{"replay": "09_sigint_late_in_stalled_stream_no_result.jsonl"}], "exited with status 0"),
        ([{"init": {}}, {"text": "half an ans"}, {"exit": 143}], "exited with status 143"),
        ([{"stderr": "Error: something broke badly\n"}, {"exit": 1}], "something broke badly"),
    ],
)
async def test_a_claude_that_ends_without_a_result_gets_one_made_by_hive(
    fake: FakeClaude, steps: list[object], says: str
) -> None:
    fake.script(steps, [{"default_turn": True}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
            after = await runtime.run("again", MemorySink())
    assert (outcome.stop_reason, outcome.is_error, outcome.synthesized) == (StopReason.EXITED, True, True)
    (result,) = result_lines(sink.data)
    assert result["subtype"] == "error_during_execution"
    assert result["hive"]["synthesized"] is True
    assert says in result["errors"][0]
    assert isinstance(sink.messages()[-1], ResultMessage)
    assert (after.stop_reason, after.is_error) == (StopReason.COMPLETED, False)  # healthy for the next turn


# 4 -----------------------------------------------------------------------------------------------


async def test_malformed_output_loses_no_later_line(fake: FakeClaude) -> None:
    fake.script(
        [
            {"init": {}},
            {"emit_raw": "[SandboxDebug] starting\n"},
            {"emit_raw": '{"type":"assistant", broken\n'},
            {"emit": {"type": "brand_new_kind", "payload": {"x": 1}}},
            {"emit_big": 2_000_000},
            {"text": "still here"},
            {"result": {}},
            {"emit_raw": '{"type":"system","subtype":"late"'},
        ]
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
    types = [json.loads(line).get("type") for line in sink.lines()]
    assert types == ["system", "brand_new_kind", "assistant", "assistant", "result"]
    assert len(sink.lines()[2]) == 2_000_000 - 1
    assert outcome.result == "still here"
    assert (outcome.stop_reason, outcome.synthesized) == (StopReason.COMPLETED, False)


# 5 -----------------------------------------------------------------------------------------------


async def test_a_claude_that_ignores_sigint_gets_only_sigint_and_the_next_turn_starts_beside_it(
    fake: FakeClaude,
) -> None:
    fake.script(
        [{"on_signal": {"SIGINT": "ignore"}}, {"init": {}}, {"text": "working"}, {"linger": True}],
        [{"default_turn": True}],
    )
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with fake.runtime(stop_grace=0.5) as runtime:
            outcome = await run_and_cancel(runtime, sink)
            next_turn = await runtime.run("next", MemorySink())
            first, second = fake.starts()
            assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (
                StopReason.CANCELLED,
                True,
                True,
            )
            assert next_turn.stop_reason is StopReason.COMPLETED
            # The ignorer still runs beside the new turn's claude, which has come and gone.
            assert fake.signals() == ["SIGINT"]
            assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]
            assert first["pid"] != second["pid"]
    (result,) = result_lines(sink.data)
    assert result["hive"]["stop_reason"] == "cancelled"


# 6 -----------------------------------------------------------------------------------------------


async def test_grandchildren_a_claude_leaves_are_its_business_not_hives(fake: FakeClaude) -> None:
    # Policy: hive stops claude, never its tools' processes; a finished command's leftovers
    # survive the turn (as with the real CLI), and hive signals nothing but claude's group.
    fake.script(
        [
            {"spawn": "exec sleep 300", "new_session": True},
            {"spawn": "exec sleep 301"},
            {"default_turn": True},
        ]
    )
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", MemorySink())
            await wait_exited(fake.starts()[0]["pid"])  # claude goes by itself: nothing to stop
    spawned = [e["pid"] for e in fake.events("spawned")]
    try:
        assert outcome.stop_reason is StopReason.COMPLETED
        assert len(spawned) == 2
        for pid in spawned:
            assert Path(f"/proc/{pid}").exists()
        assert fake.signals() == []
    finally:
        import os
        import signal

        for pid in spawned:
            os.kill(pid, signal.SIGKILL)


async def test_a_stopped_claude_ends_its_own_tool_processes(fake: FakeClaude) -> None:
    fake.script(
        [
            {"on_signal": {"SIGINT": [{"kill_spawned": "SIGTERM"}, {"interrupted": "tool"}, {"exit": 1}]}},
            {"spawn": "exec sleep 302", "new_session": True},
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 302"}}},
            {"sleep": 60},
        ]
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
    (child,) = [e["pid"] for e in fake.events("spawned")]
    await wait_exited(child)
    assert fake.signals() == ["SIGINT"]
    assert (outcome.stop_reason, outcome.synthesized) == (StopReason.CANCELLED, False)


# 7 -----------------------------------------------------------------------------------------------


async def test_a_claude_lingering_after_its_result_does_not_hold_the_turn(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}, {"linger": True}], [{"default_turn": True}])
    with trio.fail_after(GUARD):
        async with fake.runtime(linger=0.3) as runtime:
            first = await runtime.run("go", MemorySink())
            second = await runtime.run("again", MemorySink())
            lingerer, then = (start["pid"] for start in fake.starts())
            await wait_exited(lingerer)  # after the linger allowance, SIGINT ends it
            await wait_exited(then)  # before the close, which would SIGINT it if still exiting
    assert (first.stop_reason, second.stop_reason) == (StopReason.COMPLETED, StopReason.COMPLETED)
    assert fake.signals() == ["SIGINT"]


async def test_a_result_with_another_key_first_ends_the_turn_while_claude_keeps_its_output_open(
    fake: FakeClaude,
) -> None:
    # claude 2.1.318 writes "type" second in its result line; the turn must still end there,
    # not when claude closes its output (it lingers here until the close sends it SIGINT).
    fake.script([{"init": {}}, {"text": "done"}, {"result": {}, "type_second": True}, {"linger": True}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
            signals_at_the_end_of_the_turn = fake.signals()
            (lingerer,) = (start["pid"] for start in fake.starts())
        await wait_exited(lingerer)
    (line,) = [line for line in sink.lines() if b'"type":"result"' in line]
    assert not line.startswith(b'{"type"')
    assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (
        StopReason.COMPLETED,
        False,
        False,
    )
    assert outcome.session_id == fake.starts()[0]["session_id"]
    assert signals_at_the_end_of_the_turn == []
    assert fake.signals() == ["SIGINT"]


@pytest.mark.parametrize("spelling", fake_claude.SPELLINGS)
async def test_a_result_in_any_json_spelling_ends_the_turn_while_claude_stays_until_sigint(
    fake: FakeClaude, spelling: str
) -> None:
    # Issue 20, item 6: a claude-compatible CLI that writes ordinary JSON (a space after the
    # colon, another key order, escapes) and then stays: the turn ends at its result, and
    # claude is sent SIGINT (here by the runtime's close, before its linger is up).
    fake.script([{"init": {}}, {"text": "done"}, {"result": {}, "spelling": spelling}, {"linger": True}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
            signals_at_the_end_of_the_turn = fake.signals()
            (stayer,) = (start["pid"] for start in fake.starts())
        await wait_exited(stayer)
    assert b'"type":"result"' not in sink.lines()[-1]
    assert (outcome.stop_reason, outcome.synthesized, outcome.is_error, outcome.result) == (
        StopReason.COMPLETED,
        False,
        False,
        "done",
    )
    assert outcome.session_id == fake.starts()[0]["session_id"]
    assert signals_at_the_end_of_the_turn == []
    assert fake.signals() == ["SIGINT"]


async def test_a_stopped_turn_ends_at_a_result_with_another_key_first_while_claude_keeps_its_output_open(
    fake: FakeClaude,
) -> None:
    answer = [
        {"user_text": "[Request interrupted by user]"},
        {"result": {"subtype": "error_during_execution", "is_error": True}, "type_second": True},
        {"linger": True},
    ]
    fake.script([{"on_signal": {"SIGINT": answer}}, {"init": {}}, {"sleep": 60}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        # A stop grace longer than the guard: only claude's result can end this stop in time.
        async with fake.runtime(stop_grace=2 * GUARD, close_grace=0.2) as runtime:
            outcome = await run_and_cancel(runtime, sink, after_lines=1)
    assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (StopReason.CANCELLED, False, True)
    assert fake.signals() == ["SIGINT"]


async def test_closing_the_runtime_sends_a_lingering_claude_sigint_without_waiting_its_linger(
    fake: FakeClaude, caplog: pytest.LogCaptureFixture
) -> None:
    # The production linger (5 s) and close grace (2 s): closing does not wait out the linger.
    fake.script([{"default_turn": True}, {"linger": True}])
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", MemorySink())
            lingerer = fake.starts()[0]["pid"]
        await wait_exited(lingerer)
    assert outcome.stop_reason is StopReason.COMPLETED and not outcome.interrupted
    assert "lingered" not in caplog.text  # the SIGINT came from the close, not the linger timer
    assert fake.signals() == ["SIGINT"]
    assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]


# 8 -----------------------------------------------------------------------------------------------


async def test_sigint_answered_like_the_real_cli_gives_exactly_its_result(fake: FakeClaude) -> None:
    fake.script(
        [
            {"on_signal": {"SIGINT": "interrupt_tool"}},
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 100"}}},
            {"sleep": 60},
        ]
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await run_and_cancel(runtime, sink)
    (result,) = result_lines(sink.data)
    assert (result["subtype"], result["terminal_reason"]) == ("error_during_execution", "aborted_tools")
    assert "hive" not in result
    assert (outcome.stop_reason, outcome.synthesized, outcome.is_error) == (StopReason.CANCELLED, False, True)
    assert fake.signals() == ["SIGINT"]


# 9 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "steps",
    [
        [{"replay": "10_compact_in_print_mode.jsonl"}],  # status lines before init
        [{"result": {"subtype": "error_during_execution", "session_id": "lone-result"}}, {"exit": 1}],
        [{"init": {}}, {"init": {}}, {"default_turn": True}],
    ],
)
async def test_the_session_id_comes_from_whatever_arrives_first(
    fake: FakeClaude, steps: list[object]
) -> None:
    fake.script(steps)
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", sink)
    first_with_id = next(
        json.loads(line)["session_id"] for line in sink.lines() if json.loads(line).get("session_id")
    )
    assert outcome.session_id == first_with_id


# 10 ----------------------------------------------------------------------------------------------


async def test_the_command_line_environment_and_directory(
    fake: FakeClaude, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")
    fake.script([{"default_turn": True}])
    bash = StdioServer(name="bash", command="hive-bash-mcp", args=("--socket", "/run/x.sock"))
    config = {
        "model": "sonnet",
        "effort": "high",
        "system_prompt": "You are a bee.",
        "mcp_servers": (bash,),
        "allowed_tools": ("Read",),
        "disallowed_tools": ("Bash",),
    }
    with trio.fail_after(GUARD):
        async with fake.runtime(**config) as runtime:
            await runtime.run("-starts with a dash", MemorySink())
            await runtime.run("second", MemorySink())
    first, second = fake.starts()
    options = first["options"]
    assert first["argv"][1:7] == [
        "--print",
        "--input-format",
        "text",
        "--output-format",
        "stream-json",
        "--verbose",
    ]
    assert (first["prompt"], first["prompt_from"]) == ("-starts with a dash", "stdin")
    assert (second["prompt"], second["prompt_from"]) == ("second", "stdin")
    assert (options["model"], options["effort"], options["append_system_prompt"]) == (
        "sonnet",
        "high",
        "You are a bee.",
    )
    assert options["allowed_tools"] == ["Read,mcp__bash"]
    assert options["disallowed_tools"] == ["Bash"]
    (mcp_file,) = options["mcp_config"]
    assert json.loads(Path(mcp_file).read_text()) == {
        "mcpServers": {
            "bash": {
                "type": "stdio",
                "command": "hive-bash-mcp",
                "args": ["--socket", "/run/x.sock"],
                "env": {},
            }
        }
    }
    assert options["strict_mcp_config"] is True
    assert first["stdin"] == second["stdin"] == "pipe"
    assert first["cwd"] == second["cwd"] == str(fake.root)
    assert first["env"]["HOME"] == second["env"]["HOME"]
    assert first["env"].get("CLAUDECODE") is None
    assert f"--resume={first['session_id']}" in second["argv"]
    assert not first["unknown_flags"]


async def test_neither_the_token_nor_the_prompt_is_on_claudes_command_line(fake: FakeClaude) -> None:
    # Issue 20, item 12: any local user reads /proc/<pid>/cmdline. The MCP configuration goes
    # to a 0600 file in the state dir, the prompt (300 KB: past the old 100 KB cut) to stdin.
    token = "Bearer hive-test-token-0123456789abcdef"
    prompt = "the first words " + "p" * 300_000 + " the last words"
    hyperhive = HttpServer(
        name="hyperhive", url="http://127.0.0.1:9/mcp", headers=(("Authorization", token),)
    )
    state = fake.root / "state"
    state.mkdir(mode=0o700)
    fake.script([{"init": {}}, {"wait_for_signal": "SIGUSR1"}, {"text": "done"}, {"result": {}}])
    sink = MemorySink()
    outcomes = []
    with trio.fail_after(GUARD):
        async with fake.runtime(mcp_servers=(hyperhive,), state_dir=state) as runtime:
            async with trio.open_nursery() as nursery:

                async def turn() -> None:
                    outcomes.append(await runtime.run(prompt, sink))

                nursery.start_soon(turn)
                await sink.wait_for_lines(1)  # the init: claude runs, and has read all its stdin
                (start,) = fake.starts()
                cmdline = Path(f"/proc/{start['pid']}/cmdline").read_bytes().split(b"\0")
                os.kill(start["pid"], signal.SIGUSR1)
            # The fake exits by itself after its result: the runtime's close then has no claude
            # to send SIGINT to (one that lingers past its result gets it, and this one may not
            # have exited yet when the turn returns).
            await wait_exited(start["pid"])
    assert b"hive-test-token" not in b" ".join(cmdline)
    assert not any(b"first words" in arg or b"last words" in arg for arg in cmdline)
    mcp_file = state / "claude-mcp.json"
    assert cmdline[cmdline.index(b"--mcp-config") + 1] == bytes(mcp_file)
    assert os.stat(mcp_file).st_mode & 0o777 == 0o600
    assert json.loads(mcp_file.read_text())["mcpServers"]["hyperhive"]["headers"] == {"Authorization": token}
    assert (start["prompt"], start["prompt_from"]) == (prompt, "stdin")
    (stdin,) = fake.events("stdin")
    assert (stdin["bytes"], stdin["timed_out"]) == (len(prompt), False)
    assert outcomes[0].stop_reason is StopReason.COMPLETED
    assert fake.signals() == ["SIGUSR1"]


async def test_a_missing_claude_is_a_clear_error_when_the_runtime_opens(fake: FakeClaude) -> None:
    from hive.claude import open_claude_runtime
    from hive.runtime import AgentUnavailable, RuntimeSpec

    for missing in (str(fake.root / "nope"), "hive-test-no-such-claude"):
        with pytest.raises(AgentUnavailable, match=r"no such executable.*HIVE_CLAUDE_COMMAND"):
            async with open_claude_runtime(RuntimeSpec(claude_command=missing), fake.config()):
                raise AssertionError("opened a runtime without its claude")


# 11 ----------------------------------------------------------------------------------------------


async def test_a_flood_of_stderr_does_not_deadlock(fake: FakeClaude) -> None:
    fake.script([{"stderr_bytes": 1_000_000}, {"default_turn": True}])
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", MemorySink())
    assert outcome.stop_reason is StopReason.COMPLETED


# 12 ----------------------------------------------------------------------------------------------


async def test_a_slow_start_is_waited_for_without_an_idle_timeout(fake: FakeClaude) -> None:
    fake.script([{"sleep": 1.0}, {"default_turn": True}])
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            outcome = await runtime.run("go", MemorySink())
    assert outcome.stop_reason is StopReason.COMPLETED


async def test_the_idle_watchdog_takes_the_sigint_path(fake: FakeClaude) -> None:
    fake.script([{"on_signal": {"SIGINT": "interrupt_stream"}}, {"init": {}}, {"sleep": 60}])
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime(idle_timeout=0.5) as runtime:
            with pytest.raises(IdleKilled, match="sent SIGINT") as caught:
                await runtime.run("go", sink)
    outcome = caught.value.outcome
    assert outcome is not None and outcome.interrupted
    assert (outcome.stop_reason, outcome.synthesized) == (StopReason.IDLE, False)
    (result,) = result_lines(sink.data)
    assert result["terminal_reason"] == "aborted_streaming"
    assert fake.signals() == ["SIGINT"]


# compaction, archive, the canceller between turns -------------------------------------------------


def usage_turn(used: int, window: int = 1000) -> list[object]:
    return [
        {"init": {}},
        {
            "emit": {
                "type": "assistant",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "x",
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": None,
                    "usage": {"input_tokens": used, "output_tokens": 0},
                },
            }
        },
        {"result": {"modelUsage": {"x": {"contextWindow": window}}}},
    ]


async def test_past_the_watermark_a_checkpoint_turn_then_compact(fake: FakeClaude) -> None:
    fake.script(
        usage_turn(900), usage_turn(950), [{"replay": "10_compact_in_print_mode.jsonl"}], usage_turn(100)
    )
    sink = MemorySink()
    policy = CompactionPolicy(watermark=0.8, checkpoint_prompt="write it down")
    with trio.fail_after(GUARD):
        async with fake.runtime(compaction=policy) as runtime:
            outcome = await runtime.run("go", sink)
            assert outcome.usage is not None and outcome.usage.used == 900
            assert (
                runtime.context is not None and runtime.context.used == 633
            )  # the compact boundary's post_tokens
            await runtime.run("after", MemorySink())
    prompts = [s["prompt"] for s in fake.starts()]
    assert prompts == ["go", "write it down", "/compact", "after"]
    session = fake.starts()[0]["session_id"]
    assert all(f"--resume={session}" in s["argv"] for s in fake.starts()[1:])
    assert [u.used for u in sink.usages] == [900, 950, 633]


async def test_below_the_watermark_nothing_more_runs(fake: FakeClaude) -> None:
    fake.script(usage_turn(100))
    with trio.fail_after(GUARD):
        async with fake.runtime(compaction=CompactionPolicy(watermark=0.8)) as runtime:
            await runtime.run("go", MemorySink())
    assert len(fake.starts()) == 1


async def test_compact_before_any_turn_does_nothing_and_archive_starts_afresh(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            await runtime.compact(MemorySink())
            assert fake.starts() == []
            await runtime.run("one", MemorySink())
            await runtime.compact(MemorySink())
            await runtime.archive()
            assert runtime.session_id is None
            await runtime.run("two", MemorySink())
    one, compact, two = fake.starts()
    assert compact["prompt"] == "/compact" and f"--resume={one['session_id']}" in compact["argv"]
    assert not any(arg.startswith("--resume") for arg in two["argv"])
    assert two["options"].get("append_system_prompt") is None  # none configured: none passed


async def test_cancel_between_turns_does_nothing_and_turns_do_not_overlap(fake: FakeClaude) -> None:
    fake.script([{"init": {}}, {"sleep": 0.5}, {"text": "done"}, {"result": {}}])
    slow = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            runtime.canceller().cancel()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(runtime.run, "slow", slow)
                await slow.wait_for_lines(1)
                with pytest.raises(TurnFailed, match="already running"):
                    await runtime.run("overlap", MemorySink())
            # Before the close, which sends SIGINT to a claude still exiting after its result.
            await wait_exited(fake.starts()[0]["pid"])
    assert len(fake.starts()) == 1
    assert fake.signals() == []
    assert slow.types() == ["system", "assistant", "result"]


def test_choices_offer_the_clis_aliases_and_levels() -> None:
    choices = _session.ClaudeChoices()
    assert "sonnet" in choices.models() and "opus" in choices.models()
    assert choices.efforts() == ("low", "medium", "high", "xhigh", "max")


async def test_a_cancel_while_claude_is_being_started_is_not_lost(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}])
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime, trio.open_nursery() as nursery:
            outcomes: list[object] = []

            async def turn() -> None:
                outcomes.append(await runtime.run("go", sink))

            nursery.start_soon(turn)
            await trio.testing.wait_all_tasks_blocked()  # the turn is starting claude
            runtime.canceller().cancel()
    (outcome,) = outcomes
    assert outcome.stop_reason is StopReason.CANCELLED  # type: ignore[attr-defined]
    # SIGINT as soon as claude was started (maybe before the fake could record it).
    assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]


# every way a turn ends early takes the one stop path -------------------------------------------


async def test_a_cancelled_scope_around_run_sigints_claude_and_reads_its_end(fake: FakeClaude) -> None:
    fake.script(
        [
            {"on_signal": {"SIGINT": [{"kill_spawned": "SIGTERM"}, {"interrupted": "tool"}, {"exit": 1}]}},
            {"spawn": "exec sleep 303", "new_session": True},
            {"init": {}},
            {"tool_use": {"name": "Bash", "input": {"command": "sleep 303"}}},
            {"sleep": 60},
        ]
    )
    sink = MemorySink()
    sent_before = len(SIGNALS_SENT)
    with trio.fail_after(GUARD):
        async with fake.runtime() as runtime:
            with trio.CancelScope() as outer:
                async with trio.open_nursery() as nursery:

                    async def cancel_from_outside() -> None:
                        await sink.wait_for_lines(2)
                        outer.cancel()

                    nursery.start_soon(cancel_from_outside)
                    await runtime.run("go", sink)
            claude = fake.starts()[0]["pid"]
            await wait_exited(claude)
    assert outer.cancelled_caught
    (child,) = [e["pid"] for e in fake.events("spawned")]
    await wait_exited(child)  # claude ended its tool's process, as it does on SIGINT
    assert fake.signals() == ["SIGINT"]
    assert [s.signal for s in SIGNALS_SENT[sent_before:]] == ["SIGINT"]
    (result,) = result_lines(sink.data)
    assert result["terminal_reason"] == "aborted_tools"  # claude's own end, read after the cancel


async def test_a_cancelled_scope_around_run_with_a_claude_that_ignores_sigint_is_bounded(
    fake: FakeClaude,
) -> None:
    fake.script(
        [{"on_signal": {"SIGINT": "ignore"}}, {"init": {}}, {"linger": True}], [{"default_turn": True}]
    )
    sink = MemorySink()
    with trio.fail_after(GUARD):
        async with fake.runtime(stop_grace=0.3, close_grace=0.3) as runtime:
            with trio.CancelScope() as outer:
                async with trio.open_nursery() as nursery:

                    async def cancel_from_outside() -> None:
                        await sink.wait_for_lines(1)
                        outer.cancel()

                    nursery.start_soon(cancel_from_outside)
                    await runtime.run("go", sink)
            after = await runtime.run("next", MemorySink())  # the gate is open again
            await wait_exited(fake.starts()[1]["pid"])  # gone by itself before the close
    ignorer = fake.starts()[0]["pid"]
    assert outer.cancelled_caught and after.stop_reason is StopReason.COMPLETED
    assert Path(f"/proc/{ignorer}").exists()  # left running, never killed
    assert fake.signals() == ["SIGINT"]
    (result,) = result_lines(sink.data)
    assert result["hive"] == {"synthesized": True, "stop_reason": "cancelled", "exit_status": None}


@pytest.mark.parametrize(
    ("permission", "mode"),
    [
        (Permission.DEFAULT, None),
        (Permission.ACCEPT_EDITS, "acceptEdits"),
        (Permission.ALLOW, "bypassPermissions"),
    ],
)
async def test_the_permission_policy_is_claudes_permission_mode(
    fake: FakeClaude, permission: Permission, mode: str | None
) -> None:
    fake.script([{"default_turn": True}])
    server = StdioServer("bash", "hive-bash-mcp")
    with trio.fail_after(GUARD):
        async with fake.runtime(
            permission=permission, mcp_servers=(server,), env=(("IS_SANDBOX", "1"),)
        ) as runtime:
            outcome = await runtime.run("go", MemorySink())
    (start,) = fake.starts()
    assert outcome.stop_reason is StopReason.COMPLETED
    assert start["options"].get("permission_mode") == mode
    assert "--allowedTools=mcp__bash" in start["argv"]  # allowed under every policy


async def test_an_unknown_session_fails_with_session_not_found(fake: FakeClaude) -> None:
    fake.script([{"default_turn": True}], sessions=True)
    with trio.fail_after(GUARD):
        async with fake.runtime(session_id="0b7c1f5e-0000-4000-8000-000000000000") as runtime:
            with pytest.raises(SessionNotFound, match="no session '0b7c1f5e-0000-4000-8000-000000000000'"):
                await runtime.run("go on", MemorySink())
            assert runtime.session_id == "0b7c1f5e-0000-4000-8000-000000000000"
