"""``hive ls``: the fleet read from its state directories, a running harness asked, a stopped one
read from its files, an unanswering one bounded, torn files skipped; and the command itself."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import attrs
import pytest
import trio

from hive._state_dir import lock_holder, lock_state_dir
from hive._unix import open_unix_listener
from hive.agent import Arrived, ItemKind, Phase, SessionFile, TurnRecord, encode
from hive.agent_socket import AgentRequest, AgentStatus, DaemonHealth, serve_agent_socket
from hive.bash import LooseEnd, TaskRecord, TaskState, TaskStore
from hive.cli import main
from hive.cli._ls import row
from hive.fleet import ASK_SECONDS, AgentView, state_dirs, survey, survey_all
from hive.fleet._history import TAIL_BYTES, TURNS, Histories, TurnPoint, turn_points
from hive.fleet._page import agent_summary, fleet_rows
from hive.subagent import Current, SessionRecord
from hive.subagent import Store as SubagentStore
from tests.helpers.agent_loop import ScriptedRuntime, serving
from tests.helpers.processes import run_hive

GUARD = 30


def _stopped_agent(state_dir: Path) -> None:
    """The files a harness leaves: a turn log ending in a failed turn, a queue, a session, tasks
    (one running, one done), a loose end and a subagent in a turn."""
    state_dir.mkdir(parents=True)
    record = TurnRecord(
        turn=7,
        kind="turn",
        started=1000.0,
        ended=1060.0,
        outcome="failed",
        is_error=True,
        error="the agent went away",
        session_id="s-7",
        context_used=50_000,
        context_size=200_000,
        tokens={"input_tokens": 40, "output_tokens": 2},
        cost_usd=0.125,
        session_cost_usd=0.375,
    )
    (state_dir / "turns.jsonl").write_bytes(encode(record))
    (state_dir / "session").write_bytes(encode(SessionFile("claude", "s-8", 0.5)))
    (state_dir / "queue").write_bytes(b"")
    store = TaskStore(state_dir)
    store.create_dirs()
    for task_id, state in (("build", TaskState.RUNNING), ("lint", TaskState.DONE)):
        store.save_record(TaskRecord(task_id, f"serial-{task_id}", "make", "/", 1.0, state=state))
    store.save_loose_end(LooseEnd("build", "serial-build", "make", 1.0))
    subagents = SubagentStore(state_dir)
    subagents.create_dirs()
    subagents.save(SessionRecord("helper", "claude", 1.0, current=Current("t1", 1, 2.0)))
    subagents.save(SessionRecord("idle-one", "claude", 1.0))


async def test_a_stopped_agent_is_read_from_its_files(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "alpha")
    view = await survey(short_tmp / "alpha")
    assert view == AgentView(
        name="alpha",
        state_dir=str(short_tmp / "alpha"),
        harness="stopped",
        turn=7,
        queued=0,
        context_used=50_000,
        context_size=200_000,
        session_id="s-8",
        tasks_running=1,
        loose_ends=1,
        subagents_running=1,
        last_outcome="failed",
        last_ended=1060.0,
        last_error="the agent went away",
        last_cost_usd=0.125,
        last_tokens={"input_tokens": 40, "output_tokens": 2},
        session_cost_usd=0.5,
    )
    assert view.context_fraction == 0.25


async def test_torn_and_missing_files_are_left_out(short_tmp: Path) -> None:
    state_dir = short_tmp / "torn"
    _stopped_agent(state_dir)
    (state_dir / "turns.jsonl").write_bytes(b'{"type":"hive","turn":')  # cut off mid-write
    (state_dir / "session").write_bytes(b"\x00\xff")
    (state_dir / "queue").write_bytes(b"not a record\n")
    (TaskStore(state_dir).tasks_dir / "build.json").write_bytes(b'{"state": "runn')
    view = await survey(state_dir)
    assert (view.harness, view.turn, view.session_id, view.last_outcome, view.tasks_running) == (
        "stopped",
        None,
        None,
        None,
        0,
    )
    assert (view.loose_ends, view.subagents_running) == (1, 1)


async def test_a_running_harness_is_asked_and_its_turn_shown(short_tmp: Path) -> None:
    runtime = ScriptedRuntime()
    state_dir = short_tmp / "beta"
    state_dir.mkdir()
    with trio.fail_after(GUARD):
        async with serving(state_dir, runtime) as harness, trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, state_dir / "agent.sock", harness.handle)
            await harness.put(Arrived(ItemKind.PROMPT, "operator", "first"))
            await runtime.next_prompt()
            await harness.put(Arrived(ItemKind.PROMPT, "operator", "second"))
            during = await survey(state_dir)
            runtime.end()
            await runtime.next_prompt()
            runtime.end()
            await harness.wait_state(lambda s: s.phase is Phase.IDLE and not s.queued)
            after = await survey(state_dir)
            nursery.cancel_scope.cancel()
    assert (during.harness, during.state, during.turn, during.queued) == ("running", "turn", 1, 1)
    assert during.since is not None
    assert (after.harness, after.state, after.turn, after.queued, after.last_outcome) == (
        "running",
        "idle",
        2,
        0,
        "completed",
    )
    assert after.session_id == "session-1"


async def test_an_agent_that_does_not_answer_is_said_so_and_holds_up_no_other(short_tmp: Path) -> None:
    mute, quiet = short_tmp / "mute", short_tmp / "quiet"
    _stopped_agent(quiet)
    mute.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(mute / "agent.sock"))
    listener.listen()  # accepts (the kernel does), never answers
    try:
        with trio.fail_after(GUARD):
            started = trio.current_time()
            views = await survey_all(state_dirs([short_tmp]))
            took = trio.current_time() - started
    finally:
        listener.close()
    assert [(v.name, v.harness) for v in views] == [("mute", "not answering"), ("quiet", "stopped")]
    assert took >= ASK_SECONDS


def test_state_dirs_are_found_one_level_down_and_named_once(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "b")
    _stopped_agent(short_tmp / "a")
    (short_tmp / "empty").mkdir()
    (short_tmp / "file").write_text("x")
    assert state_dirs([short_tmp, short_tmp / "a", short_tmp / "nowhere"]) == [
        short_tmp / "a",
        short_tmp / "b",
    ]


def test_a_row_says_what_the_agent_does_and_how_its_last_turn_ended() -> None:
    view = AgentView(
        name="gamma",
        state_dir="/x/gamma",
        harness="running",
        state="turn",
        since=1000.0,
        turn=4,
        queued=2,
        context_used=150,
        context_size=200,
        tasks_running=3,
        last_outcome="completed",
        last_ended=990.0,
    )
    cells = row(view, now=1042.0)
    assert cells[:9] == ("gamma", "running", "turn 4 for 42 s", "2", "75%", "-", "3", "0", "0")
    assert cells[9].startswith("completed at ")


def test_hive_ls_prints_a_table_and_json(short_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _stopped_agent(short_tmp / "alpha")
    assert main(["ls", str(short_tmp)]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header.split() == [
        "agent",
        "harness",
        "doing",
        "queue",
        "context",
        "session",
        "tasks",
        "loose",
        "subagents",
        "last",
        "turn",
    ]
    assert line.split()[:9] == ["alpha", "stopped", "-", "0", "25%", "s-8", "1", "1", "1"]
    assert "failed at " in line and line.endswith(": the agent went away")
    done = run_hive("ls", "--json", short_tmp / "alpha", timeout=GUARD)
    assert done.returncode == 0, done.stderr
    (listed,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (listed["name"], listed["harness"], listed["tasks_running"]) == ("alpha", "stopped", 1)


def test_hive_ls_says_where_it_found_nothing(short_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", str(short_tmp)]) == 0
    assert (
        capsys.readouterr().out
        == f"no agent state directories in {short_tmp} (give one with `hive ls DIR`, or set HIVE_STATE_ROOT)\n"
    )


def _turn(number: int, cost: float) -> bytes:
    """A turn that cost ``cost``; its result line says what its session had cost (the turn's
    record is what says the turn's own)."""
    session = 10 + number * cost
    result = f'{{"type":"result","subtype":"success","is_error":false,"total_cost_usd":{session}}}\n'.encode()
    return result + encode(
        TurnRecord(
            turn=number,
            kind="turn",
            started=float(number),
            ended=number + 0.5,
            tokens={"input_tokens": number, "output_tokens": 1},
            cost_usd=cost,
            session_cost_usd=session,
        )
    )


def test_the_last_turns_are_followed_from_what_was_appended(short_tmp: Path) -> None:
    log = short_tmp / "turns.jsonl"
    log.write_bytes(b"".join(_turn(n, 0.5) for n in range(1, 4)))
    histories = Histories()
    assert [(p.turn, p.tokens, p.cost) for p in histories.points(log)] == [
        (1, 2, 0.5),
        (2, 3, 0.5),
        (3, 4, 0.5),
    ]
    with open(log, "ab") as file:
        whole = _turn(4, 0.25)
        file.write(whole[:30])  # a turn half-written: its record comes once whole
        file.flush()
        assert [p.turn for p in histories.points(log)] == [1, 2, 3]
        file.write(whole[30:])
    assert histories.points(log)[-1] == TurnPoint(turn=4, ended=4.5, tokens=5, cost=0.25)
    log.write_bytes(b"".join(_turn(n, 0.0) for n in range(1, TURNS + 20)))  # replaced: read anew
    points = histories.points(log)
    assert len(points) == TURNS and points[-1].turn == TURNS + 19
    assert [p.turn for p in turn_points(log)] == [p.turn for p in points]


def test_a_turn_followed_is_kept_however_much_comes_after_it_before_the_next_look(short_tmp: Path) -> None:
    log = short_tmp / "turns.jsonl"
    log.write_bytes(_turn(1, 0.5))
    histories = Histories()
    assert [p.turn for p in histories.points(log)] == [1]
    stream = b'{"type":"assistant","text":"%s"}\n' % (b"x" * 1000)
    with open(log, "ab") as file:
        file.write(_turn(2, 0.5) + stream * (TAIL_BYTES // len(stream) + 1) + _turn(3, 0.5))
    assert [p.turn for p in histories.points(log)] == [1, 2, 3]


async def test_a_harness_that_holds_the_state_dir_but_whose_socket_is_elsewhere_is_not_answering(
    short_tmp: Path,
) -> None:
    _stopped_agent(short_tmp / "delta")
    assert (await survey(short_tmp / "delta")).harness == "stopped"
    with lock_state_dir(short_tmp / "delta", "agent.lock", holder="hive-agent"):
        assert lock_holder(short_tmp / "delta" / "agent.lock") == os.getpid()
        assert (await survey(short_tmp / "delta")).harness == "not answering"
    assert lock_holder(short_tmp / "delta" / "agent.lock") is None


async def test_a_harness_that_hangs_up_on_the_question_is_stopped(short_tmp: Path) -> None:
    """Its socket resets the connection (a harness going away as it is asked): said stopped."""
    state_dir = short_tmp / "delta"
    state_dir.mkdir(mode=0o700)

    async def hang_up(stream: trio.SocketStream) -> None:
        await stream.aclose()

    with trio.fail_after(GUARD):
        async with open_unix_listener(state_dir / "agent.sock") as listener, trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, hang_up, [listener])
            view = await survey(state_dir)
            nursery.cancel_scope.cancel()
    assert view.harness == "stopped"


async def test_a_supervised_daemon_that_is_down_is_said_beside_the_harness(short_tmp: Path) -> None:
    state_dir = short_tmp / "delta"
    state_dir.mkdir()
    down = DaemonHealth("down", 1000.0, restarts=2, last_exit="killed by SIGKILL", restart_at=1002.0)

    async def handle(request: AgentRequest) -> AgentStatus | None:
        running = DaemonHealth("running", 990.0, 42)
        return AgentStatus(state="idle", state_dir=str(state_dir), bash_daemon=down, subagent_daemon=running)

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, state_dir / "agent.sock", handle)
            view = await survey(state_dir)
            nursery.cancel_scope.cancel()
    assert (view.bash_daemon, view.subagent_daemon) == ("down", "running")
    assert row(view, now=1001.0)[1] == "running (bash daemon down)"
    page = fleet_rows([attrs.asdict(view)], now=1001.0) + agent_summary(view, now=1001.0)
    assert page.count("running (bash daemon down)") == 2


@pytest.mark.parametrize("command", [["ls"], ["web", "--listen", "127.0.0.1:0"]])
def test_a_dir_that_is_missing_or_no_directory_exits_2_saying_so(short_tmp: Path, command: list[str]) -> None:
    (short_tmp / "file").write_text("")
    for given, says in (
        (short_tmp / "missing", "no such directory"),
        (short_tmp / "file", "not a directory"),
    ):
        done = run_hive(*command, given, timeout=GUARD)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stdout == ""
        assert (
            done.stderr == f"hive: {given}: {says}; give agents' state directories, or directories of them\n"
        )
