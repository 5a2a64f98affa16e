"""The hyperhive tools over streamable HTTP: the real `mcp` SDK client against the server, a real
bash daemon's loose ends, the bearer token, bad files in the loose-ends directory, and shutdown."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import jsonschema
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

import hive.agent._hyperhive as hyperhive_module
import hive.agent._hyperhive_tools as tools_module
from hive.agent._hyperhive import SHUTDOWN_GRACE, Hyperhive, hyperhive_server, serve_hyperhive
from hive.agent._hyperhive_tools import TOOLS, HyperhiveTools
from hive.agent._loose_ends import describe, read_loose_ends
from hive.bash._records import LooseEnd, OwedWake, TaskRecord
from hive.bash._wire import encode
from hive.runtime import HttpServer
from hive.wake import Refused
from tests.helpers.daemon import DaemonHandle
from tests.helpers.forked_daemon import forked_daemon_under
from tests.helpers.gates import make_gate, open_gate, start_gated
from tests.helpers.hyperhive import raw_post, session, tool_call
from tests.helpers.processes import wait_exited
from tests.helpers.results import call, structured, text_of
from tests.helpers.strategies import loose_end_files, loose_ends, records

LOOSE_ENDS_SCHEMA = next(t["output_schema"] for t in TOOLS if t["name"] == "loose_ends")


@pytest.fixture
def daemon(short_tmp: Path) -> Iterator[DaemonHandle]:
    """The paths of a daemon under ``short_tmp``, forked from the zygote when the test starts it
    (see ``tests.helpers.forked_daemon``): a restart costs a fork, not the SDK's import."""
    yield from forked_daemon_under(short_tmp)


@attrs.define
class Served:
    hyperhive: Hyperhive
    scope: trio.CancelScope
    compacts: list[None] = attrs.field(factory=list)
    returned: trio.Event = attrs.field(factory=trio.Event)

    @property
    def port(self) -> int:
        return int(self.hyperhive.url.split(":")[2].split("/")[0])


@asynccontextmanager
async def serving(loose_ends_dir: Path, shutdown_grace: float = SHUTDOWN_GRACE) -> AsyncIterator[Served]:
    """The server in a scope of its own; the block may cancel it (``scope``) and wait for its end."""
    compacts: list[None] = []
    scope = trio.CancelScope()
    returned = trio.Event()

    async def compact() -> None:
        compacts.append(None)

    async def serve(*, task_status: trio.TaskStatus[Hyperhive]) -> None:
        with scope:
            await serve_hyperhive(
                loose_ends_dir=loose_ends_dir,
                on_compact=compact,
                shutdown_grace=shutdown_grace,
                task_status=task_status,
            )
        returned.set()

    async with trio.open_nursery() as nursery:
        h = await nursery.start(serve)
        yield Served(h, scope, compacts, returned)
        scope.cancel()


def listening_ports() -> set[int]:
    """The TCP ports this process listens on (IPv4): its sockets' inodes, found in /proc/net/tcp."""
    ours = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            ours.add(target.removeprefix("socket:[").removesuffix("]"))
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in ours:  # TCP_LISTEN
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


# -- the tools over HTTP -------------------------------------------------------------------------


async def test_lists_the_two_tools_with_their_schemas(short_tmp: Path) -> None:
    async with serving(short_tmp / "mcp-loose-ends") as served, session(served.hyperhive) as s:
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
    async with serving(short_tmp / "mcp-loose-ends") as served, session(served.hyperhive) as s:
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
                    session(served.hyperhive) as s,
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
    async with serving(short_tmp / "state" / "mcp-loose-ends") as served, session(served.hyperhive) as s:
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
        async with serving(loose) as served, session(served.hyperhive) as s:
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


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


# -- the token ------------------------------------------------------------------------------------


async def test_a_request_without_the_token_gets_401_and_reaches_no_tool(short_tmp: Path) -> None:
    async with serving(short_tmp / "mcp-loose-ends") as served:
        h = served.hyperhive
        refusals = [
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": f"Bearer {h.token}x"},
            {"Authorization": f"bearer{h.token}"},
            {"Authorization": h.token},
        ]
        for headers in refusals:
            response = await raw_post(h, headers, tool_call("compact"))
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "Authorization" in response.json()["error"]
        assert served.compacts == []

        # The same request with the token reaches the tool: the refusals above were the token's.
        accepted = await raw_post(h, {"Authorization": f"Bearer {h.token}"}, tool_call("compact"))
        assert accepted.status_code == 200, accepted.text
        assert served.compacts == [None]

        # The SDK's client with a wrong token fails to connect, and reaches nothing either.
        # (The SDK reports the 401 as an error response, without its status.)
        with pytest.raises(BaseExceptionGroup) as refused:
            async with session(h, {"Authorization": "Bearer wrong"}):
                pass
        assert [type(exc) for exc in leaves(refused.value)] == [MCPError], repr(refused.value)
        assert served.compacts == [None]


def test_hyperhive_server_gives_the_agent_the_url_and_the_token() -> None:
    h = Hyperhive(url="http://127.0.0.1:4242/mcp", token="tok")
    assert hyperhive_server(h) == HttpServer(
        name="hyperhive",
        url="http://127.0.0.1:4242/mcp",
        headers=(("Authorization", "Bearer tok"),),
        allow_all_tools=True,
    )
    assert "tok" not in repr(h)


# -- shutdown -------------------------------------------------------------------------------------


async def test_cancelling_its_scope_stops_the_server_and_its_listener(short_tmp: Path) -> None:
    with trio.fail_after(30):
        async with serving(short_tmp / "mcp-loose-ends") as served:
            async with session(served.hyperhive) as s:
                await call(s, "loose_ends")
                assert served.port in listening_ports()
                # A client still connected (keep-alive) does not hold the shutdown up.
                served.scope.cancel()
                await served.returned.wait()
            assert served.port not in listening_ports()
            with pytest.raises(OSError):
                await trio.open_tcp_stream("127.0.0.1", served.port)


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


async def test_a_request_in_flight_is_answered_after_the_listener_closes(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = BlockedRead()
    monkeypatch.setattr(tools_module, "read_loose_ends", blocked)
    answers: list[httpx2.Response] = []
    with trio.fail_after(30):
        async with serving(short_tmp / "mcp-loose-ends") as served:
            h = served.hyperhive

            async def ask() -> None:
                answers.append(
                    await raw_post(h, {"Authorization": f"Bearer {h.token}"}, tool_call("loose_ends"))
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await blocked.entered.wait()
                served.scope.cancel()
                # Everything the shutdown can do without the request is done: the listener is gone.
                await trio.testing.wait_all_tasks_blocked()
                assert served.port not in listening_ports()
                assert not served.returned.is_set()
                blocked.release.set()
            await served.returned.wait()
    (answer,) = answers
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert not result["isError"]
    assert result["structuredContent"]["total"] == 0


async def test_a_request_that_never_finishes_is_cancelled_after_the_grace(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = BlockedRead()
    monkeypatch.setattr(tools_module, "read_loose_ends", blocked)
    grace = SHUTDOWN_GRACE / 4
    try:
        with trio.fail_after(grace + 20):
            async with (
                serving(short_tmp / "mcp-loose-ends", grace) as served,
                trio.open_nursery() as nursery,
            ):

                async def ask() -> None:
                    with pytest.raises(Exception):  # noqa: B017 (the server went away mid-request)
                        async with session(served.hyperhive) as s:
                            await call(s, "loose_ends")

                nursery.start_soon(ask)
                await blocked.entered.wait()
                start = trio.current_time()
                served.scope.cancel()
                await served.returned.wait()
                took = trio.current_time() - start
                assert served.port not in listening_ports()
    finally:
        blocked.release.set()
    assert took >= grace


async def test_a_cancel_while_it_starts_ends_it_and_nothing_is_left_listening(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 38, item 11: hypercorn started shielded, waiting for a stop that its caller sets only
    # once the start returned, so a cancel during the start (SIGINT to a starting hive-agent)
    # hung it for good.
    importing = trio.Event()
    release = threading.Event()
    token = trio.lowlevel.current_trio_token()
    imports = hyperhive_module._import_http_stack

    def slow_import() -> None:
        trio.from_thread.run_sync(importing.set, trio_token=token)
        release.wait()
        imports()

    async def compact() -> None:
        pass

    monkeypatch.setattr(hyperhive_module, "_import_http_stack", slow_import)
    before = listening_ports()
    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                with trio.CancelScope() as start:

                    async def stop_while_importing() -> None:
                        await importing.wait()
                        start.cancel()
                        release.set()

                    nursery.start_soon(stop_while_importing)
                    await nursery.start(
                        functools.partial(
                            serve_hyperhive, loose_ends_dir=short_tmp / "mcp-loose-ends", on_compact=compact
                        )
                    )
                assert start.cancelled_caught
    finally:
        release.set()
    assert listening_ports() <= before


async def test_importing_the_module_imports_neither_the_sdk_nor_hypercorn() -> None:
    probe = (
        "import sys, hive.agent._hyperhive; "
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
    from hive.bash._records import LooseEnd, OwedWake, TaskRecord
    from hive.bash._store import TaskStore

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
