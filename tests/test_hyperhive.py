"""The hyperhive tools as hive-agent serves them: the kit's MCP server on a Unix socket, reached
through the real relay (hive-hyperhive-mcp) by the real `mcp` SDK's stdio client; a real bash
daemon's loose ends, bad files in the loose-ends directory, the harness stopping and coming back."""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

import hive.agent._hyperhive_tools as tools_module
from hive.agent._hyperhive import serve_hyperhive
from hive.agent._hyperhive_tools import TOOLS, HyperhiveTools
from hive.agent._loose_ends import describe, read_loose_ends
from hive.agent_socket import Refused
from hive.bash import LooseEnd, OwedWake, TaskRecord, encode
from tests.helpers.daemon import DaemonHandle
from tests.helpers.gates import make_gate, open_gate, start_gated
from tests.helpers.hyperhive import session
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of
from tests.helpers.strategies import loose_end_files, loose_ends, records

LOOSE_ENDS_SCHEMA = next(t["output_schema"] for t in TOOLS if t["name"] == "loose_ends")


pytestmark = pytest.mark.forked_daemon


@attrs.define
class Served:
    socket: Path
    scope: trio.CancelScope
    compacts: list[None] = attrs.field(factory=list)
    returned: trio.Event = attrs.field(factory=trio.Event)


@asynccontextmanager
async def serving(loose_ends_dir: Path, socket: Path | None = None) -> AsyncIterator[Served]:
    """The server (on ``socket``, else ``hyperhive.sock`` beside ``loose_ends_dir``) in a scope of
    its own; the block may cancel it (``scope``) and wait for its end."""
    socket = socket or loose_ends_dir.parent / "hyperhive.sock"
    compacts: list[None] = []
    scope = trio.CancelScope()
    returned = trio.Event()

    async def compact() -> None:
        compacts.append(None)

    async def serve(*, task_status: trio.TaskStatus[None]) -> None:
        with scope:
            await serve_hyperhive(
                socket, loose_ends_dir=loose_ends_dir, on_compact=compact, task_status=task_status
            )
        returned.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(serve)
        yield Served(socket, scope, compacts, returned)
        scope.cancel()


# -- the tools through the relay --------------------------------------------------------------------


async def test_lists_the_two_tools_with_their_schemas(short_tmp: Path) -> None:
    async with serving(short_tmp / "mcp-loose-ends") as served, session(served.socket) as s:
        listed = await s.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"loose_ends", "compact"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80
        assert tool.output_schema is not None
        assert tool.output_schema["required"] == ["message"]
    assert tools["loose_ends"].input_schema["properties"]["limit"]["minimum"] == 0
    assert tools["compact"].input_schema["properties"] == {}


async def test_compact_calls_on_compact_and_says_it_follows_the_turn(short_tmp: Path) -> None:
    async with serving(short_tmp / "mcp-loose-ends") as served, session(served.socket) as s:
        assert served.compacts == []
        result = await call(s, "compact")
        assert not result.is_error
        assert served.compacts == [None]
        answer = structured(result)
        assert answer["requested"] is True
        assert answer["when"] == "after_this_turn"
        assert "once this turn ends" in text_of(result)
        assert answer["message"] == text_of(result)

        wrong = await call(s, "compact", now=True)
        assert wrong.is_error
        assert structured(wrong)["error"] == "BadArgument"
        assert "takes no arguments" in text_of(wrong)
        assert served.compacts == [None]


async def test_loose_ends_of_a_real_daemon_with_no_agent_socket(
    daemon: DaemonHandle, short_tmp: Path
) -> None:
    build_gate = make_gate(short_tmp, "build-gate")
    slow_gate = make_gate(short_tmp, "slow-gate")
    build = f"echo compiling; echo linked; read line < {build_gate}; exit 3"
    with trio.fail_after(60):
        async with daemon.running(agent=False):
            async with daemon.session() as bash:
                started = structured(await call(bash, "run", cmd=build, name="build", wait_seconds=0))
                assert started["wake"] is None  # no agent socket: its end stays a loose end
                build_pid = structured(await call(bash, "status", id="build"))["pid"]
            open_gate(build_gate)
            await wait_exited(build_pid)
        # The daemon saw "build" end (or, had it stopped first, its successor settles it before
        # it answers): once a daemon on this state dir is ready, the loose end holds the wake.
        async with daemon.running(agent=False):
            slow_pid = await start_gated(daemon, "slow", slow_gate)
            try:
                async with (
                    serving(daemon.state_dir / "mcp-loose-ends") as served,
                    session(served.socket) as s,
                ):
                    result = await call(s, "loose_ends")
                    first = await call(s, "loose_ends", limit=1)
                    bad = await call(s, "loose_ends", limit=-1)
            finally:
                open_gate(slow_gate)
                await wait_exited(slow_pid)

    assert not result.is_error, text_of(result)
    answer = structured(result)
    assert answer["total"] == 2
    assert answer["ended"] == 1
    assert answer["unreadable"] == []
    ended, running = answer["loose_ends"]  # oldest first

    tasks = daemon.state_dir / "bash-tasks"
    assert ended["id"] == "build"
    assert ended["cmd"] == build
    assert ended["state"] == "done"
    assert ended["ended"] is True
    assert ended["exit_code"] == 3
    assert ended["stdout_path"] == str(tasks / "build.out")
    assert ended["stderr_path"] == str(tasks / "build.err")
    assert Path(ended["stdout_path"]).read_text() == "compiling\nlinked\n"
    assert ended["wake"]["from"] == "bash-task-build"
    assert "exit code 3" in ended["wake"]["body"]
    assert "linked" in ended["wake"]["body"]

    assert running["id"] == "slow"
    assert running["state"] == "running"
    assert running["ended"] is False
    assert running["exit_code"] is None
    assert running["wake"] is None

    text = text_of(result)
    assert "2 loose ends" in text
    assert "build: done, exit code 3" in text
    assert "slow: running for" in text
    assert str(tasks / "build.out") in text
    assert "its wake (from bash-task-build)" in text
    assert "Listing them does not settle them" in answer["message"]

    shown = structured(first)
    assert [e["id"] for e in shown["loose_ends"]] == ["build"]
    assert shown["total"] == 2
    assert "pass limit=0 for all" in text_of(first)
    assert bad.is_error
    assert "limit must be a whole number" in text_of(bad)


async def test_no_daemon_yet_means_no_loose_ends(short_tmp: Path) -> None:
    state = short_tmp / "state"
    async with (
        serving(state / "mcp-loose-ends", short_tmp / "hyperhive.sock") as served,
        session(served.socket) as s,
    ):
        result = await call(s, "loose_ends")
    assert not result.is_error
    assert structured(result)["loose_ends"] == []
    assert "has not run on this state directory" in text_of(result)


async def test_bad_files_in_the_loose_ends_dir_do_not_break_the_tool(short_tmp: Path) -> None:
    loose = short_tmp / "mcp-loose-ends"
    tasks = short_tmp / "bash-tasks"
    loose.mkdir()
    tasks.mkdir()
    good = LooseEnd("good", "s1", "make", 1000.0, OwedWake("bash-task-good", "bash task good ended"))
    (loose / "bash-task-good.json").write_bytes(encode(good))
    (tasks / "good.json").write_bytes(encode(TaskRecord("good", "s1", "make", "/", 1000.0)))
    (loose / "bash-task-garbage.json").write_bytes(b"\xff\x00not json")
    (loose / "bash-task-deep.json").write_text("[" * 100_000)
    (loose / "bash-task-other.json").write_bytes(encode(attrs.evolve(good, task_id="someone-else")))
    (loose / "bash-task-huge.json").write_bytes(b" " * (9 * 1024 * 1024))
    os.mkfifo(loose / "bash-task-fifo.json")
    (loose / "bash-task-dir.json").mkdir()
    (loose / "bash-task-link.json").symlink_to(loose / "bash-task-good.json")
    (loose / "unrelated.txt").write_text("not a loose end")
    with trio.fail_after(30):
        async with serving(loose) as served, session(served.socket) as s:
            result = await call(s, "loose_ends")
    assert not result.is_error, text_of(result)
    answer = structured(result)
    assert [e["id"] for e in answer["loose_ends"]] == ["good"]
    # Its record is of the same run but not final: its wake says it ended, not how.
    assert answer["loose_ends"][0]["state"] == "unknown"
    assert answer["loose_ends"][0]["ended"] is True
    unreadable = {Path(u["path"]).name for u in answer["unreadable"]}
    assert unreadable == {
        f"bash-task-{name}.json" for name in ("garbage", "deep", "other", "huge", "fifo", "dir", "link")
    }
    assert "7 files" in text_of(result)


# -- the socket, the harness stopping and coming back ------------------------------------------------


async def test_the_socket_is_the_owners_alone_and_goes_when_the_server_stops(short_tmp: Path) -> None:
    with trio.fail_after(30):
        async with serving(short_tmp / "mcp-loose-ends") as served:
            mode = os.stat(served.socket).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
            served.scope.cancel()
            await served.returned.wait()
            assert not served.socket.exists()


async def test_while_the_harness_is_down_a_call_says_so_and_the_same_relay_reaches_it_back(
    short_tmp: Path,
) -> None:
    loose = short_tmp / "mcp-loose-ends"
    socket = short_tmp / "hyperhive.sock"
    with trio.fail_after(30):
        async with session(socket) as s:
            listed = await s.list_tools()
            assert {tool.name for tool in listed.tools} == {"loose_ends", "compact"}
            down = await call(s, "compact")
            async with serving(loose, socket) as served:
                back = await call(s, "compact")
    assert down.is_error
    said = text_of(down)
    assert f"hive-hyperhive-mcp cannot reach hive-agent's hyperhive server at {socket}" in said
    assert "no socket there (is hive-agent running?)" in said
    assert "nothing was done; call again once it is back" in said
    assert not back.is_error, text_of(back)
    assert served.compacts == [None]


@attrs.define
class BlockedRead:
    """A stand-in for the loose-ends read that blocks its worker thread until released."""

    entered: trio.Event = attrs.field(factory=trio.Event)
    release: threading.Event = attrs.field(factory=threading.Event)
    token: trio.lowlevel.TrioToken = attrs.field(factory=trio.lowlevel.current_trio_token)

    def __call__(self, loose_ends_dir: Path) -> Any:
        trio.from_thread.run_sync(self.entered.set, trio_token=self.token)
        self.release.wait()
        return read_loose_ends(loose_ends_dir)


async def test_a_call_in_flight_when_the_harness_stops_is_answered_with_an_error_saying_so(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = BlockedRead()
    monkeypatch.setattr(tools_module, "read_loose_ends", blocked)
    try:
        with trio.fail_after(30):
            async with serving(short_tmp / "mcp-loose-ends") as served, session(served.socket) as s:
                async with trio.open_nursery() as nursery:

                    async def stop_once_called() -> None:
                        await blocked.entered.wait()
                        served.scope.cancel()  # the harness stops: its server is cancelled

                    nursery.start_soon(stop_once_called)
                    with pytest.raises(MCPError) as failed:
                        await call(s, "loose_ends")
                await served.returned.wait()
                assert not served.socket.exists()
    finally:
        blocked.release.set()
    said = failed.value.error.message
    assert (
        f"hive-agent's hyperhive server at {served.socket} went away before answering this tools/call" in said
    )
    assert "hive-agent stopped; call again once it is back" in said


async def test_importing_the_module_imports_neither_the_sdk_nor_hypercorn() -> None:
    probe = (
        "import sys, hive.agent._hyperhive, hive.agent.hyperhive_mcp; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'hypercorn', 'starlette'}))"
    )
    done = await trio.run_process([sys.executable, "-c", probe], capture_stdout=True)
    assert done.stdout.decode().strip() == "[]"


# -- bad input to the parser ----------------------------------------------------------------------


@functools.cache
def _loose_ends_validator() -> Any:
    """What `jsonschema.validate` builds for the loose-ends schema, built (and the schema
    checked) once: checking it is most of a validation's cost."""
    validator_class = jsonschema.validators.validator_for(LOOSE_ENDS_SCHEMA)
    validator_class.check_schema(LOOSE_ENDS_SCHEMA)
    return validator_class(LOOSE_ENDS_SCHEMA)


def _check_answer(loose_ends_dir: Path) -> dict[str, Any]:
    listing = read_loose_ends(loose_ends_dir)
    text, answer = describe(listing, loose_ends_dir, limit=0, now=2e9)
    _loose_ends_validator().validate(answer)
    json.dumps(answer, allow_nan=False).encode()
    text.encode()
    return answer


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda n: "/" not in n and "\0" not in n),
        loose_end_files,
        max_size=5,
    ),
    record_files=st.dictionaries(st.sampled_from(["a", "b", "c", "x.1"]), loose_end_files, max_size=3),
    matching=st.lists(st.tuples(loose_ends, records), max_size=3),
)
def test_any_files_in_the_loose_ends_dir_give_an_answer(
    tmp_path_factory: pytest.TempPathFactory,
    files: dict[str, bytes],
    record_files: dict[str, bytes],
    matching: list[tuple[LooseEnd, TaskRecord]],
) -> None:
    root = tmp_path_factory.mktemp("state")
    loose = root / "mcp-loose-ends"
    tasks = root / "bash-tasks"
    loose.mkdir()
    tasks.mkdir()
    for name, data in files.items():
        (loose / f"bash-task-{name}.json").write_bytes(data)
    for name, data in record_files.items():
        (tasks / f"{name}.json").write_bytes(data)
    # Well-formed loose ends with records of the same run, and of another.
    for loose_end, record in matching:
        same_run = attrs.evolve(record, id=loose_end.task_id, serial=loose_end.serial)
        (loose / f"bash-task-{loose_end.task_id}.json").write_bytes(encode(loose_end))
        (tasks / f"{loose_end.task_id}.json").write_bytes(encode(same_run))
    answer = _check_answer(loose)
    listed = {e["id"] for e in answer["loose_ends"]} | {Path(u["path"]).name for u in answer["unreadable"]}
    assert len(listed) == len(list(loose.glob("bash-task-*.json")))
    for loose_end, record in matching:
        if (loose / f"bash-task-{loose_end.task_id}.json").read_bytes() == encode(loose_end):
            (entry,) = (e for e in answer["loose_ends"] if e["id"] == loose_end.task_id)
            if (tasks / f"{loose_end.task_id}.json").read_bytes() == encode(
                attrs.evolve(record, id=loose_end.task_id, serial=loose_end.serial)
            ) and record.state.final:
                assert entry["state"] == record.state.value
                assert entry["exit_code"] == record.exit_code


@pytest.mark.parametrize(
    "data",
    [
        b'{"task_id":"t","serial":"s","cmd":"x","since":1e999}',
        b'{"task_id":"t","serial":"s","cmd":"\\udc80","since":NaN}',
        b'{"task_id":"t","serial":"s","cmd":"x","since":1,"wake":{"sender":"\\ud800","body":"\\udfff"}}',
        b'{"task_id":"t","serial":"s","cmd":"x","since":' + b"9" * 400 + b"}",
        b"[" * 50_000 + b"]" * 50_000,
        b'{"task_id":"t","serial":"s","cmd":"' + b"c" * 3_000_000 + b'","since":1}',
    ],
    ids=["inf", "nan-surrogate", "surrogate-wake", "huge-int", "deep", "long-cmd"],
)
def test_odd_but_parseable_values_are_shown_safely(tmp_path: Path, data: bytes) -> None:
    loose = tmp_path / "mcp-loose-ends"
    loose.mkdir()
    (loose / "bash-task-t.json").write_bytes(data)
    answer = _check_answer(loose)
    assert len(answer["loose_ends"]) + len(answer["unreadable"]) == 1
    for entry in answer["loose_ends"]:
        assert len(entry["cmd"]) < 1000


def test_the_largest_loose_end_the_daemon_writes_is_read(tmp_path: Path) -> None:
    # The longest command `run` takes (1 MiB), of the characters JSON escapes longest.
    cmd = "\x01" * (1024 * 1024)
    loose = tmp_path / "mcp-loose-ends"
    loose.mkdir()
    data = encode(LooseEnd("big", "s", cmd, 1.0, OwedWake("bash-task-big", "ended")))
    assert len(data) > 6 * 1024 * 1024
    (loose / "bash-task-big.json").write_bytes(data)
    answer = _check_answer(loose)
    assert answer["unreadable"] == []
    (entry,) = answer["loose_ends"]
    assert entry["cmd"].startswith("\x01" * 500 + "… [cut: 1048576 characters in all")


def test_the_tools_object_answers_a_read_error_as_a_tool_error(tmp_path: Path) -> None:
    loose = tmp_path / "mcp-loose-ends"
    loose.write_text("a file where the directory should be")
    tools = HyperhiveTools(loose, _never_asked)
    result = trio.run(tools.call, "loose_ends", {})
    assert result.is_error
    assert result.structured["error"] == "DiskError"
    assert "cannot list the loose ends" in result.text
    unknown = trio.run(tools.call, "nope", None)
    assert unknown.is_error
    assert "loose_ends, compact" in unknown.text


async def _never_asked() -> None:
    raise AssertionError("compact was not called")


def test_a_compaction_the_harness_cannot_write_down_is_a_tool_error(tmp_path: Path) -> None:
    async def refuse() -> None:
        raise Refused("could not write the queue /s/queue: No space left on device")

    tools = HyperhiveTools(tmp_path, refuse)
    result = trio.run(tools.call, "compact", {})
    assert result.is_error
    assert result.structured["error"] == "CompactRefused"
    assert "compaction not requested: could not write the queue" in result.text
    assert "again" in result.text


def test_an_earlier_runs_loose_end_is_listed_with_its_own_runs_files(tmp_path: Path) -> None:
    from hive.bash import LooseEnd, OwedWake, TaskRecord, TaskStore

    store = TaskStore(tmp_path)
    store.create_dirs()
    first = TaskRecord(id="x", serial="a" * 16, cmd="exit 3", cwd="/", created_at=1.0)
    store.save_record(first)
    store.save_loose_end(
        LooseEnd("x", first.serial, "exit 3", 1.0, OwedWake("bash-task-x", "x ended: exit code 3")),
        earlier=True,
    )
    store.rotate("x")  # a later run took the name: the first's files are the generation 1
    store.save_record(TaskRecord(id="x", serial="b" * 16, cmd="sleep 9", cwd="/", created_at=2.0))
    store.save_loose_end(LooseEnd("x", "b" * 16, "sleep 9", 2.0))
    listing = read_loose_ends(store.loose_ends_dir)
    assert not listing.unreadable
    earlier, latest = listing.entries
    assert (earlier.cmd, earlier.stdout_path) == ("exit 3", str(store.tasks_dir / "x.out.1"))
    assert earlier.wake is not None and "exit code 3" in earlier.wake.body
    assert (latest.cmd, latest.state, latest.stdout_path) == (
        "sleep 9",
        "running",
        str(store.tasks_dir / "x.out"),
    )
