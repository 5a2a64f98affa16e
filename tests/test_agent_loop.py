"""The harness's turn loop (hive.agent._loop) over a scripted Runtime: no process, a real queue file.

The runtime here tells the test each prompt it is given and ends each turn as the test says,
so every interleaving of arrivals, turn ends, failures, compactions and restarts can be set
up exactly; a Hypothesis test runs random ones in lockstep with the pure model.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from hive.agent._arrivals import judged
from hive.agent._harness_files import Added, TurnRecord, TurnStart
from hive.agent._loop import Harness
from hive.agent._model import (
    Arrived,
    CompactAsked,
    CompactEnded,
    ItemKind,
    LoopState,
    Phase,
    Recorded,
    Restarted,
    RetryDue,
    StartCompact,
    StartTurn,
    TurnEnded,
    Written,
    admit,
    advance,
    next_step,
)
from hive.agent._prompt import render_prompt
from hive.agent._queue import load, replay
from hive.agent_socket import AgentStatus, Compact, Prompt, Refused, Status, Wake
from hive.sink import ContextUsage
from tests.helpers.agent_loop import GUARD, ScriptedRuntime, scripted, serving
from tests.helpers.strategies import loop_operations


def hive_lines(state_dir: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (state_dir / "turns.jsonl").read_bytes().splitlines()]
    return [line for line in lines if line.get("type") == "hive"]


async def idle(harness: Harness) -> None:
    await harness.wait_state(lambda s: s.phase is Phase.IDLE)


async def end_turn(harness: Harness, runtime: ScriptedRuntime) -> None:
    """The running turn ends complete; the harness goes idle."""
    runtime.end()
    await idle(harness)


# -- turns -----------------------------------------------------------------------------------------


async def test_a_turn_carries_everything_queued_and_what_comes_during_it_waits(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1"))
        first = await runtime.next_prompt()
        assert first == "[wake from bash-task-a]\na ended"
        await harness.handle(Wake("bash-task-b", "b ended"))
        await harness.handle(Prompt("and look at c"))
        assert harness.status().queue == 2 and harness.status().state == "turn"
        runtime.end()
        second = await runtime.next_prompt()
        assert second == "[wake from bash-task-b]\nb ended\n\n[message from operator]\nand look at c"
        await end_turn(harness, runtime)
        assert runtime.prompts == [first, second]
    records = hive_lines(short_tmp)
    assert [r["turn"] for r in records] == [1, 2]
    assert [[c["from"] for c in r["carried"]] for r in records] == [
        ["bash-task-a"],
        ["bash-task-b", "operator"],
    ]
    assert records[0]["carried"][0]["end_id"] == "a:1"
    assert all(r["outcome"] == "completed" and r["delivered"] for r in records)
    assert records[1]["session_id"] == "session-1"
    # Each turn's start (what it carries), then its stream in claude's shape, then its record.
    lines = [json.loads(line) for line in (short_tmp / "turns.jsonl").read_bytes().splitlines()]
    assert [line["type"] for line in lines] == ["hive_start", "system", "assistant", "result", "hive"] * 2
    starts = [line for line in lines if line["type"] == "hive_start"]
    assert [(s["turn"], s["kind"], s["carried"]) for s in starts] == [
        (r["turn"], r["kind"], r["carried"]) for r in records
    ]
    assert [s["started"] for s in starts] == [r["started"] for r in records]
    # Nothing left to replay.
    records_on_disk, _ = load(short_tmp / "queue")
    assert replay(records_on_disk).queued == ()


async def test_each_turn_is_one_line_of_the_harness_log_at_the_default_level(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 38, item 10: hive-agent in the foreground said nothing of its turns at its default level.
    caplog.set_level(logging.INFO, logger="hive.agent")
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("bash-task-a", "a ended"))
        await runtime.next_prompt()
        await harness.handle(Wake("bash-task-b", "b ended"))
        await harness.handle(Prompt("and look at c"))
        runtime.end()
        await runtime.next_prompt()
        runtime.end("fail_after_result")
        await idle(harness)
    turns = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("turn ")]
    assert len(turns) == 2, turns
    assert turns[0][0] == logging.INFO
    assert re.fullmatch(
        r"turn 1: carried 1 message \(from bash-task-a\); completed after \d+\.\d s", turns[0][1]
    )
    assert turns[1][0] == logging.WARNING
    ended = r"turn 2: carried 2 messages \(from bash-task-b, operator\); failed after \d+\.\d s: "
    assert re.match(ended, turns[1][1])


async def test_a_repeated_end_is_acknowledged_and_dropped(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1"))
        await runtime.next_prompt()
        await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1"))  # while carried
        await end_turn(harness, runtime)
        await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1"))  # after
        await harness.handle(Wake("bash-task-a", "a ended again", end_id="a:2"))
        assert await runtime.next_prompt() == "[wake from bash-task-a]\na ended again"
        await end_turn(harness, runtime)
    assert len(runtime.prompts) == 2


async def test_concurrent_arrivals_share_the_queue_writes(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Prompt("first"))
        await runtime.next_prompt()
        syncs = harness.queue.syncs
        async with trio.open_nursery() as nursery:
            for n in range(200):
                nursery.start_soon(harness.handle, Wake(f"bash-task-{n}", f"body {n}", end_id=f"{n}:s"))
        # Every one was written before its answer; far fewer syncs than wakes.
        assert harness.status().queue == 200
        assert harness.queue.syncs - syncs < 20
        runtime.end()
        prompt = await runtime.next_prompt()
        # All of them, once each, in the order they were admitted (Trio runs the senders in
        # no fixed order): the order of the queue's file.
        carried = [line for line in prompt.splitlines() if line.startswith("[")]
        admitted = [r.item.sender for r in load(short_tmp / "queue")[0] if isinstance(r, Added)][1:]
        assert carried == [f"[wake from {sender}]" for sender in admitted]
        assert sorted(admitted) == sorted(f"bash-task-{n}" for n in range(200))
        await end_turn(harness, runtime)


async def test_the_budget_splits_a_burst_into_turns_in_order(short_tmp: Path) -> None:
    async with scripted(short_tmp, budget=100) as (harness, runtime):
        await harness.handle(Prompt("hold"))
        await runtime.next_prompt()
        for n in range(6):
            await harness.handle(Wake(f"t{n}", "x" * 30))
        runtime.end()
        senders: list[str] = []
        while len(senders) < 6:
            prompt = await runtime.next_prompt()
            senders += [line for line in prompt.splitlines() if line.startswith("[")]
            runtime.end()
        await idle(harness)
    assert senders == [f"[wake from t{n}]" for n in range(6)]
    assert len(runtime.prompts) == 1 + 3


async def test_a_long_message_is_cut_to_the_budget(short_tmp: Path) -> None:
    async with scripted(short_tmp, budget=1000) as (harness, runtime):
        await harness.handle(Prompt("é" * 5000))
        prompt = await runtime.next_prompt()
        await end_turn(harness, runtime)
    assert len(prompt.encode()) < 1200
    assert "more bytes cut" in prompt


# -- failures ------------------------------------------------------------------------------------


def test_a_turn_that_could_not_start_keeps_its_messages_and_is_retried_after_a_growing_backoff(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        runtime = ScriptedRuntime()
        async with serving(tmp_path, runtime) as harness:
            await harness.handle(Wake("bash-task-a", "a ended"))
            times = []
            for _ in range(3):
                await runtime.next_prompt()
                times.append(trio.current_time())
                runtime.end("unavailable")
            await runtime.next_prompt()
            times.append(trio.current_time())
            assert harness.status().last_stop_reason == "not started"
            assert "no such agent" in (harness.status().last_error or "")
            await end_turn(harness, runtime)
            assert [round(b - a) for a, b in itertools.pairwise(times)] == [1, 2, 4]
        assert len(set(runtime.prompts)) == 1
        records = hive_lines(tmp_path)
        assert [r["outcome"] for r in records] == ["not started"] * 3 + ["completed"]
        assert [r["delivered"] for r in records] == [False] * 3 + [True]
        # A turn that never started is no turn: each try is turn 1, until one starts.
        assert [r["turn"] for r in records] == [1, 1, 1, 1]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_after_a_restart_the_turn_that_never_started_is_tried_under_its_own_number(
    tmp_path: Path,
) -> None:
    refusing = ScriptedRuntime()
    async with serving(tmp_path, refusing) as harness:
        await harness.handle(Wake("bash-task-a", "a ended"))
        await refusing.next_prompt()
        refusing.end("unavailable")
        await harness.wait_state(lambda s: s.phase is Phase.BACKOFF)
    runtime = ScriptedRuntime()
    async with serving(tmp_path, runtime) as harness:
        await runtime.next_prompt()
        await end_turn(harness, runtime)
        assert harness.status().last_turn == 1
    assert [(r["turn"], r["outcome"]) for r in hive_lines(tmp_path)] == [(1, "not started"), (1, "completed")]


async def test_an_idle_turn_and_a_failure_after_the_result_carried_their_messages(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        runtime.end("idle")
        await idle(harness)
        await harness.handle(Wake("b", "2"))
        await runtime.next_prompt()
        runtime.end("fail_after_result")
        await idle(harness)
        assert harness.status().queue == 0
    records = hive_lines(short_tmp)
    assert [(r["outcome"], r["delivered"]) for r in records] == [("idle", True), ("failed", True)]
    assert "sent nothing" in records[0]["error"]


async def test_an_unknown_session_is_forgotten_and_the_turn_retried_at_once_in_a_new_one(
    short_tmp: Path,
) -> None:
    (short_tmp / "session").write_text('{"backend":"scripted","session_id":"gone"}')
    async with scripted(short_tmp) as (harness, runtime):
        assert runtime.session_id == "gone"
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        runtime.end("session_not_found")
        await runtime.next_prompt()
        await end_turn(harness, runtime)
        assert harness.status().session_id == "session-1"
    assert runtime.archived == 1
    assert json.loads((short_tmp / "session").read_text()) == {
        "backend": "scripted",
        "session_id": "session-1",
        "cost_usd": 0.0,
    }


# -- compaction ---------------------------------------------------------------------------------


async def test_an_operator_compact_runs_at_once_when_idle_and_after_the_turn_otherwise(
    short_tmp: Path,
) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Compact())
        await harness.wait_state(lambda _: runtime.compactions == 1)
        await idle(harness)
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        await harness.handle(Compact())
        await harness.handle(Wake("b", "2"))
        assert harness.status().compact_pending
        assert runtime.compactions == 1
        runtime.end()
        # The compaction comes first, then the turn carrying what waited.
        await runtime.next_prompt()
        assert runtime.compactions == 2
        await end_turn(harness, runtime)
    records = hive_lines(short_tmp)
    assert [(r["kind"], r.get("requested_by")) for r in records] == [
        ("compact", "operator"),
        ("turn", None),
        ("compact", "operator"),
        ("turn", None),
    ]


async def test_the_agents_compact_tool_compacts_after_its_own_turn(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        await harness.ask_compact("agent")  # what the hyperhive compact tool calls
        assert runtime.compactions == 0
        runtime.end()
        await harness.wait_state(lambda _: runtime.compactions == 1)
        await idle(harness)
    assert hive_lines(short_tmp)[-1]["requested_by"] == "agent"


async def test_a_compaction_asked_for_during_a_stopped_turn_runs_first_after_the_restart(
    short_tmp: Path,
) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        await harness.handle(Compact())
        await harness.ask_compact("agent")
        # Stopped here: the turn never ended, the compaction never started.
    async with scripted(short_tmp) as (harness, again):
        assert await again.next_prompt() == "[wake from a]\n1"
        assert again.compactions == 1  # before the turn
        await end_turn(harness, again)
    async with scripted(short_tmp) as (harness, _):
        assert not harness.status().compact_pending  # it ran: not owed again
    assert [(r["kind"], r.get("requested_by"), r["outcome"]) for r in hive_lines(short_tmp)] == [
        ("turn", None, "stopped"),
        ("compact", "operator, agent", "completed"),
        ("turn", None, "completed"),
    ]


async def test_a_compaction_that_cannot_be_written_down_is_refused(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        harness.queue._fd, good = -1, harness.queue._fd  # a file that cannot be written
        with pytest.raises(Refused, match="could not queue the compaction"):
            await harness.handle(Compact())
        harness.queue._fd = good
        assert not harness.status().compact_pending
        assert runtime.compactions == 0


# -- status, restarts -----------------------------------------------------------------------------


async def test_status_says_what_the_harness_is_doing(short_tmp: Path) -> None:
    async with scripted(short_tmp, runtime=ScriptedRuntime(usage=ContextUsage(used=50, size=200))) as (
        harness,
        runtime,
    ):
        status = await harness.handle(Status())
        assert status == AgentStatus(
            state="idle", pid=status.pid if status else None, state_dir=str(short_tmp)
        )
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        await harness.handle(Wake("b", "2"))
        during = harness.status()
        assert (during.state, during.queue, during.carrying, during.turns) == ("turn", 1, 1, 1)
        runtime.end()
        await runtime.next_prompt()
        await end_turn(harness, runtime)
        after = harness.status()
        assert (after.state, after.queue, after.turns, after.last_stop_reason) == (
            "idle",
            0,
            2,
            "completed",
        )
        assert (after.context_used, after.context_size, after.session_id) == (50, 200, "session-1")


async def test_status_names_the_running_turn_and_the_last_that_ended_over_a_restart(short_tmp: Path) -> None:
    runtime = ScriptedRuntime()
    with trio.fail_after(GUARD):
        async with serving(short_tmp, runtime) as harness:
            await harness.handle(Prompt("one"))
            await runtime.next_prompt()
            first = harness.status()
            assert (first.state, first.turns, first.running_turn, first.last_turn) == ("turn", 1, 1, None)
            assert first.last_stop_reason is None and first.running_since is not None
            await end_turn(harness, runtime)
            await harness.handle(Prompt("two"))
            await runtime.next_prompt()
            second = harness.status()
            assert (second.running_turn, second.last_turn, second.last_kind, second.last_stop_reason) == (
                2,
                1,
                "turn",
                "completed",
            )
            assert second.last_started is not None and second.last_ended is not None
            assert first.running_since == second.last_started <= second.last_ended
            assert second.running_since is not None and second.last_ended <= second.running_since
            await end_turn(harness, runtime)
            await harness.handle(Compact())
            await harness.wait_state(lambda _: runtime.compactions == 1)
            await idle(harness)
            done = harness.status()
            assert (done.running_turn, done.running_since, done.last_turn, done.last_kind) == (
                None,
                None,
                3,
                "compact",
            )
        # A restart reads the last turn that ended from the turn log.
        async with serving(short_tmp, ScriptedRuntime()) as harness:
            after = harness.status()
            assert (after.state, after.turns, after.running_turn) == ("idle", 3, None)
            assert (after.last_turn, after.last_kind, after.last_stop_reason) == (3, "compact", "completed")
            assert (after.last_started, after.last_ended) == (done.last_started, done.last_ended)


async def test_a_restart_after_a_crash_in_a_turn_numbers_on_past_it(short_tmp: Path) -> None:
    lines = [
        {"type": "hive_start", "turn": 4, "kind": "turn", "started": 10.0},
        {"type": "hive", "turn": 4, "kind": "turn", "started": 10.0, "ended": 12.0, "outcome": "idle"},
        {"type": "hive_start", "turn": 5, "kind": "turn", "started": 20.0},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "then SIGKILL"}]}},
    ]
    (short_tmp / "turns.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with scripted(short_tmp) as (harness, runtime):
        status = harness.status()
        assert (status.turns, status.last_turn, status.last_stop_reason) == (5, 4, "idle")
        assert (status.last_started, status.last_ended) == (10.0, 12.0)
        await harness.handle(Prompt("again"))
        await runtime.next_prompt()
        assert harness.status().running_turn == 6
        await end_turn(harness, runtime)
    assert [r["turn"] for r in hive_lines(short_tmp)] == [4, 6]


async def test_an_empty_or_blank_prompt_is_refused_and_nothing_is_queued(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        for text in ("", " ", "\n\t \r\n"):
            with pytest.raises(Refused, match="the prompt is empty"):
                await harness.handle(Prompt(text))
        assert harness.status().queue == 0
        assert not [r for r in load(short_tmp / "queue")[0] if isinstance(r, Added)]
        await harness.handle(Prompt(" words "))
        assert await runtime.next_prompt() == "[message from operator]\n words "
        await end_turn(harness, runtime)


async def test_a_harness_stopped_during_a_turn_replays_its_messages_and_resumes_the_session(
    short_tmp: Path,
) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Wake("a", "1"))
        await runtime.next_prompt()
        await end_turn(harness, runtime)
        await harness.handle(Wake("b", "2"))
        await harness.handle(Wake("c", "3"))
        await runtime.next_prompt()
        # Stopped here: the turn never reached its result.
    assert hive_lines(short_tmp)[-1]["outcome"] == "stopped"
    async with scripted(short_tmp) as (harness, again):
        assert again.session_id == "session-1"
        assert await again.next_prompt() == "[wake from b]\n2\n\n[wake from c]\n3"
        await end_turn(harness, again)


async def test_a_failed_write_is_refused_and_nothing_is_queued(short_tmp: Path) -> None:
    async with scripted(short_tmp) as (harness, runtime):
        harness.queue._fd, good = -1, harness.queue._fd  # a file that cannot be written
        with pytest.raises(Refused, match="could not queue it"):
            await harness.handle(Wake("a", "1"))
        harness.queue._fd = good
        assert harness.status().queue == 0
        await harness.handle(Wake("b", "2"))
        assert await runtime.next_prompt() == "[wake from b]\n2"
        await end_turn(harness, runtime)


# -- in lockstep with the model -------------------------------------------------------------------


@settings(max_examples=40)
@given(ops=loop_operations, budget=st.sampled_from([40, 100_000]))
def test_the_loop_does_what_the_model_says(ops: list[tuple[Any, ...]], budget: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="hive-al-", dir="/tmp"))
    try:
        trio.run(_lockstep, root, list(ops), budget)
    finally:
        shutil.rmtree(root, ignore_errors=True)


LOCKSTEP_GUARD = 10


async def _lockstep(root: Path, ops: list[tuple[Any, ...]], budget: int) -> None:
    model = LoopState()
    runtime = ScriptedRuntime()
    counter = 0
    with trio.fail_after(LOCKSTEP_GUARD):
        while True:
            restart = False
            async with serving(root, runtime, budget=budget, retry_first=0.0) as harness:
                assert _items(harness.state) == _items(model)
                model = await _settle(harness, runtime, model, budget)
                while ops and not restart:
                    op, *args = ops.pop(0)
                    if op == "arrive":
                        kind, end_id = args
                        counter += 1
                        body = f"m{counter}" * (counter % 5 + 1)
                        model, _ = admit(model, Arrived(kind, "s", body, end_id))
                        model = advance(model, Written(tuple(i.seq for i in model.pending)))
                        await harness.put(Arrived(kind, "s", body, end_id))
                    elif op == "end" and model.phase is Phase.TURN:
                        (ending,) = args
                        delivered = ending in ("complete", "idle", "fail_after_result")
                        running = harness.running
                        assert running is not None
                        runtime.end(ending)
                        model = advance(model, TurnEnded(delivered))
                        model = advance(model, Recorded()) if delivered else advance(model, RetryDue())
                        await harness.wait_state(lambda s, r=running: _turn_over(harness, s, r))
                    elif op == "compact":
                        model = advance(model, CompactAsked(args[0]))
                        await harness.ask_compact(args[0])
                    elif op == "restart":
                        restart = True
                        continue
                    model = await _settle(harness, runtime, model, budget)
                    assert [i.seq for i in harness.state.queued] == [i.seq for i in model.queued]
                    assert harness.state.phase is model.phase
                    assert harness.state.carrying == model.carrying
                    assert harness.state.seen == model.seen
            model = advance(model, Restarted())
            runtime = ScriptedRuntime()
            replayed = replay(load(root / "queue")[0])
            assert _items(replayed) == _items(model)
            assert replayed.seen == model.seen
            assert replayed.compact == model.compact
            if not ops:
                break


def _items(state: LoopState) -> list[tuple[Any, ...]]:
    return [(i.seq, i.kind, i.sender, i.body, i.end_id) for i in state.queued]


def _turn_over(harness: Harness, state: LoopState, running: TurnStart) -> bool:
    """Whether the turn ``running`` has ended and been recorded (or put off for its retry, which
    a turn that did not start numbers as it was)."""
    ended = harness.last is not None and harness.last.turn >= running.turn
    settled = state.phase not in (Phase.RECORDING, Phase.BACKOFF)
    return ended and settled and harness.running is not running


async def _settle(harness: Harness, runtime: ScriptedRuntime, model: LoopState, budget: int) -> LoopState:
    """Take the model's steps, checking that the harness takes the same ones."""
    while True:
        model, step = next_step(model, budget)
        if isinstance(step, StartCompact):
            runtime.compactions_expected += 1
            await harness.wait_state(
                lambda s: (
                    runtime.compactions == runtime.compactions_expected and s.phase is not Phase.COMPACTING
                )
            )
            model = advance(model, CompactEnded())
        elif isinstance(step, StartTurn):
            assert await runtime.next_prompt() == render_prompt(step.items, budget)
            await harness.wait_state(lambda s: s.phase is Phase.TURN)
            return model
        else:
            await harness.wait_state(lambda s, phase=model.phase: s.phase is phase)
            return model


async def test_a_restart_does_not_carry_again_what_the_last_turn_delivered_before_a_kill(
    short_tmp: Path,
) -> None:
    # Killed between the turn's record (durable) and the queue's `carried` line: the turn log
    # says the message reached the agent, so the restart does not carry it a second time.
    async with scripted(short_tmp) as (harness, runtime):
        await harness.handle(Prompt("once"))
        await runtime.next_prompt()
        await end_turn(harness, runtime)
    queue = short_tmp / "queue"
    kept = [line for line in queue.read_bytes().splitlines(keepends=True) if b'"carried"' not in line]
    queue.write_bytes(b"".join(kept))
    async with scripted(short_tmp) as (harness, runtime):
        assert harness.status().queue == 0
        await harness.handle(Prompt("then this"))
        assert "once" not in await runtime.next_prompt()
        await end_turn(harness, runtime)


async def test_a_wake_shown_inline_is_settled_by_the_turn_it_was_shown_in(short_tmp: Path) -> None:
    async with scripted(short_tmp, retry_first=0.0) as (harness, runtime):
        # Shown in a turn that delivered: held while it runs, then gone with it.
        await harness.handle(Prompt("one"))
        await runtime.next_prompt()
        await harness.handle(Wake("bash-task-a", "a ended", end_id="a:1", shown_at=time.time()))
        assert harness.status().queue == 0
        await end_turn(harness, runtime)
        # Its wake came once that turn had ended: judged by its record at once.
        await harness.handle(Prompt("two"))
        await runtime.next_prompt()
        shown = time.time()
        await end_turn(harness, runtime)
        await harness.handle(Wake("bash-task-b", "b ended", end_id="b:1", shown_at=shown))
        await harness.handle(Wake("bash-task-b", "b ended", end_id="b:1"))  # a repeat
        assert harness.status().queue == 0
        # Shown in a turn that did not deliver, its wake coming during it or after: carried.
        await harness.handle(Prompt("three"))
        await runtime.next_prompt()
        await harness.handle(Wake("bash-task-c", "c ended", end_id="c:1", shown_at=time.time()))
        shown = time.time()
        runtime.end("unavailable")
        retried = await runtime.next_prompt()
        await harness.handle(Wake("bash-task-d", "d ended", end_id="d:1", shown_at=shown))
        runtime.end()
        last = await runtime.next_prompt()
        await end_turn(harness, runtime)
    assert retried == "[message from operator]\nthree\n\n[wake from bash-task-c]\nc ended"
    assert last == "[wake from bash-task-d]\nd ended"
    assert len(runtime.prompts) == 5
    journal = load(short_tmp / "queue")[0]
    assert replay(journal).queued == ()


# -- a wake shown inline, judged by the turn it was shown in -------------------------------------


def _shown(at: float) -> Arrived:
    return Arrived(ItemKind.WAKE, "bash-task-t", "ended", "t:1", shown_at=at)


@pytest.mark.parametrize(
    ("phase", "running", "shown_at", "settled"),
    [
        # The daemon stamps an end shown once the answer is written: under load, after the agent
        # read it and ended its turn (at 20.0). That turn is still the last one: it settles it.
        (Phase.IDLE, None, 20.5, True),
        (Phase.RECORDING, TurnStart(1, "turn", 10.0), 20.5, True),
        # A later turn started before it was shown: it was shown in that one (held for it) ...
        (Phase.TURN, TurnStart(2, "turn", 20.5), 20.6, False),
        # ... and one shown before the later turn started was the earlier turn's.
        (Phase.TURN, TurnStart(2, "turn", 20.8), 20.5, True),
    ],
)
def test_a_wake_shown_in_a_turn_that_delivered_is_settled_by_it_even_if_stamped_after_its_end(
    phase: Phase, running: TurnStart | None, shown_at: float, settled: bool
) -> None:
    ended = TurnRecord(1, "turn", started=10.0, ended=20.0, delivered=True)
    result = judged(_shown(shown_at), phase, running, ended)
    if settled:
        assert result is None, result
    else:
        assert result is not None and result.shown, result
