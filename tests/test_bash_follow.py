"""Following a task's output: ``status`` with ``stdout_offset`` / ``stderr_offset`` reads from an
offset and, with ``wait_seconds``, waits for the output to grow (inotify), for the end, or for
the deadline. The reads are proven on files in-process (Hypothesis); the waits with the tools in
the test's own Trio run over real tasks; one call through a real daemon and relay."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hive.bash import BashTools
from hive.bash.files._output import MAX_NEW_BYTES, read_new
from hive.cli._bash_tail import offset_of_last_lines
from tests.helpers.daemon import DaemonHandle, tail_follow_argv
from tests.helpers.gates import make_gate, release_gate
from tests.helpers.processes import receive_until, started_ignoring_sigint
from tests.helpers.results import call, structured, text_of
from tests.helpers.tools import serving_tools

# -- reading from an offset (in-process) ---------------------------------------------------------

_TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
_BYTES = st.one_of(_TEXTS.map(str.encode), st.binary(max_size=30))
"""Writes of UTF-8 text (characters of one to four bytes) and of arbitrary bytes."""


def _follow(path: Path, *, final: bool) -> tuple[str, list[int]]:
    text, offsets, offset = "", [0], 0
    while True:
        new = read_new("stdout", path, offset, final=final)
        text += new.text
        if new.next == offset:
            return text, offsets
        assert new.next - offset <= MAX_NEW_BYTES
        offset = new.next
        offsets.append(offset)


@given(writes=st.lists(_BYTES, max_size=12), cuts=st.lists(st.integers(0, 200), max_size=6))
def test_following_the_next_offsets_from_0_reads_the_file_once_whatever_the_writes(
    writes: list[bytes], cuts: list[int], tmp_path_factory: Any
) -> None:
    path = tmp_path_factory.mktemp("follow") / "out"
    data = b"".join(writes)
    path.write_bytes(data)
    whole = data.decode("utf-8", errors="replace")
    assert _follow(path, final=True)[0] == whole
    # Written so far, in pieces: each read ends on a whole character, so the texts still join up.
    text, offset = "", 0
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        path.write_bytes(data[:cut])
        new = read_new("stdout", path, offset, final=cut == len(data))
        text += new.text
        offset = new.next
    assert text == whole
    # Reading consumes nothing: every offset reads the same again.
    for offset in range(0, len(data) + 1, 7):
        assert read_new("stdout", path, offset, final=True) == read_new("stdout", path, offset, final=True)


def test_a_read_takes_at_most_64_kib_and_ends_on_a_whole_character(tmp_path: Path) -> None:
    path = tmp_path / "out"
    # A four-byte character straddles the cap.
    data = b"a" * (MAX_NEW_BYTES - 2) + "😀".encode() + b"tail"
    path.write_bytes(data)
    first = read_new("stdout", path, 0, final=True)
    assert (first.next, first.text, first.more) == (MAX_NEW_BYTES - 2, "a" * (MAX_NEW_BYTES - 2), True)
    second = read_new("stdout", path, first.next, final=True)
    assert (second.text, second.next, second.more) == ("😀tail", len(data), False)


def test_an_incomplete_character_at_the_end_waits_while_the_task_runs_and_is_replaced_once_it_ended(
    tmp_path: Path,
) -> None:
    path = tmp_path / "out"
    path.write_bytes(b"ok " + "é".encode()[:1])
    running = read_new("stdout", path, 0, final=False)
    assert (running.text, running.next) == ("ok ", 3)
    ended = read_new("stdout", path, 0, final=True)
    assert (ended.text, ended.next) == ("ok \ufffd", 4)


# -- the tool, in-process over real tasks ---------------------------------------------------------


async def _status(tools: BashTools, **args: Any) -> tuple[str, dict[str, Any]]:
    result = await tools.call("status", args)
    assert not result.is_error, result.text
    return result.text, result.structured


async def test_a_waiting_status_returns_when_the_output_grows_not_at_the_end(short_tmp: Path) -> None:
    first, second = make_gate(short_tmp, "g1"), make_gate(short_tmp, "g2")
    cmd = f"echo one; read x < {first}; echo two >&2; echo three; read x < {second}"
    async with serving_tools(short_tmp) as tools:
        run = await tools.call("run", {"cmd": cmd, "name": "f", "wait_seconds": 0})
        assert not run.is_error, run.text
        _, seen = await _status(tools, id="f", stdout_offset=0, stderr_offset=0, wait_seconds=30)
        assert (seen["stdout_new"], seen["stdout_next"], seen["stderr_new"]) == ("one\n", 4, "")
        async with trio.open_nursery() as nursery:
            answers: list[dict[str, Any]] = []

            async def wait_for_stderr() -> None:
                answers.append((await _status(tools, id="f", stderr_offset=0, wait_seconds=30))[1])

            nursery.start_soon(wait_for_stderr)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []  # nothing new yet: it waits
            await release_gate(first)
        (grown,) = answers
        assert grown["state"] == "running"  # woken by the output, long before the end
        assert (grown["stderr_new"], grown["stderr_next"]) == ("two\n", 4)
        assert "stdout_new" not in grown
        text, later = await _status(tools, id="f", stdout_offset=4, wait_seconds=30)
        assert later["stdout_new"] == "three\n" and later["stdout_next"] == 10
        assert "--- stdout from byte 4: 6 bytes new, of 10 (next stdout_offset=10) ---\nthree" in text
        await release_gate(second)
        await _status(tools, id="f", wait_seconds=30)


async def test_a_waiting_status_returns_at_the_end_or_the_deadline_with_nothing_new(short_tmp: Path) -> None:
    gate = make_gate(short_tmp)
    async with serving_tools(short_tmp) as tools:
        await tools.call("run", {"cmd": f"read x < {gate}; exit 3", "name": "quiet", "wait_seconds": 0})
        text, waited = await _status(tools, id="quiet", stdout_offset=0, wait_seconds=0.05)
        assert (waited["state"], waited["stdout_new"], waited["stdout_next"]) == ("running", "", 0)
        assert "--- stdout: nothing new past byte 0 (next stdout_offset=0) ---" in text
        async with trio.open_nursery() as nursery:
            answers: list[dict[str, Any]] = []

            async def wait() -> None:
                answers.append((await _status(tools, id="quiet", stdout_offset=0, wait_seconds=30))[1])

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            await release_gate(gate)
        (ended,) = answers
        assert (ended["state"], ended["exit_code"], ended["stdout_new"]) == ("done", 3, "")


async def test_an_offset_past_the_end_is_refused_with_where_the_end_is(short_tmp: Path) -> None:
    async with serving_tools(short_tmp) as tools:
        await tools.call("run", {"cmd": "printf 12345", "name": "p", "wait_seconds": 30})
        refused = await tools.call("status", {"id": "p", "stdout_offset": 6, "wait_seconds": 5, "full": True})
        assert refused.is_error and refused.structured["error"] == "OffsetPastEnd"
        assert "stdout_offset 6 is past the end of the task's stdout, which is 5 bytes long" in refused.text
        bad = await tools.call("status", {"id": "p", "stderr_offset": -1, "full": True})
        assert bad.is_error and bad.structured["error"] == "BadArgument"
        _, at_end = await _status(tools, id="p", stdout_offset=5)
        assert (at_end["stdout_new"], at_end["stdout_next"]) == ("", 5)


# -- through a real daemon and relay --------------------------------------------------------------


async def test_status_from_an_offset_through_the_relay(served: DaemonHandle) -> None:
    async with served.session() as session:
        await call(session, "run", cmd="printf 'héllo\\nworld\\n'", name="follow-relay", wait_seconds=30)
        result = await call(session, "status", id="follow-relay", stdout_offset=3)
        got = structured(result)
        assert (got["stdout_new"], got["stdout_next"]) == ("llo\nworld\n", 13)
        assert "--- stdout from byte 3: 10 bytes new, of 13 (next stdout_offset=13) ---" in text_of(result)
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert {"stdout_offset", "stderr_offset"} <= set(tools["status"].input_schema["properties"])
        assert os.path.basename(got["stdout"]["path"]) == "follow-relay.out"


# -- hive bash tail ------------------------------------------------------------------------------


@given(
    lines=st.lists(st.text(alphabet="ab\r", max_size=5), max_size=8),
    ends=st.booleans(),
    count=st.integers(0, 10),
)
def test_the_last_n_lines_start_where_tail_would_start_them(
    lines: list[str], ends: bool, count: int, tmp_path_factory: Any
) -> None:
    data = "\n".join(lines).encode() + (b"\n" if ends and lines else b"")
    path = tmp_path_factory.mktemp("tail") / "out"
    path.write_bytes(data)
    start = offset_of_last_lines(str(path), len(data), count)
    kept = re.findall(rb"[^\n]*\n|[^\n]+$", data)  # lines as tail(1) counts them: by newline alone
    assert data[start:] == b"".join(kept[max(0, len(kept) - count) :] if count else [])


async def _hive(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *args], capture_stdout=True, capture_stderr=True, check=False
    )


async def test_hive_bash_tail_prints_each_stream_whole_or_its_last_lines(served: DaemonHandle) -> None:
    sock = str(served.socket)
    async with served.session() as session:
        cmd = "printf 'a\\nb\\nc\\n'; echo e >&2; exit 3"
        await call(session, "run", cmd=cmd, name="tail-done", wait_seconds=30)
    with trio.fail_after(60):
        whole = await _hive("bash", "tail", "tail-done", "--socket", sock)
        last = await _hive("bash", "tail", "tail-done", "--from-end", "2", "--socket", sock)
        followed = await _hive("bash", "tail", "-f", "tail-done", "--socket", sock)
        missing = await _hive("bash", "tail", "no-such-task", "--socket", sock)
    assert (whole.returncode, whole.stdout, whole.stderr) == (0, b"a\nb\nc\n", b"e\n")
    assert (last.returncode, last.stdout, last.stderr) == (0, b"b\nc\n", b"e\n")
    assert (followed.returncode, followed.stdout) == (3, b"a\nb\nc\n")  # the task's status
    assert missing.returncode == 1 and b"no task has id 'no-such-task'" in missing.stderr


async def test_hive_bash_tail_follow_prints_as_the_task_writes_and_ends_with_it(
    served: DaemonHandle, short_tmp: Path
) -> None:
    gate = make_gate(short_tmp)
    async with served.session() as session:
        cmd = f"echo one; read x < {gate}; echo two; exit 4"
        await call(session, "run", cmd=cmd, name="tail-live", wait_seconds=0)
    argv = tail_follow_argv("tail-live", "--socket", str(served.socket), flag="--follow")
    tail = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
    assert tail.stdout is not None
    try:
        with trio.fail_after(60):
            # printed while the task still waits on its gate
            seen = await receive_until(tail.stdout, lambda seen: seen == b"one\n")
            await release_gate(gate)
            while chunk := await tail.stdout.receive_some():
                seen += chunk
            assert await tail.wait() == 4
    finally:
        if tail.returncode is None:
            tail.send_signal(signal.SIGINT)
            await tail.wait()
        await tail.stdout.aclose()
    assert seen == b"one\ntwo\n"


async def test_hive_bash_tail_follow_started_with_sigint_ignored_still_stops_on_sigint(
    served: DaemonHandle, short_tmp: Path
) -> None:
    gate = make_gate(short_tmp)
    async with served.session() as session:
        await call(session, "run", cmd=f"echo one; read x < {gate}", name="tail-held", wait_seconds=0)
    argv = tail_follow_argv("tail-held", "--socket", str(served.socket))
    try:
        async with started_ignoring_sigint(argv, stdout=subprocess.PIPE) as tail:
            assert tail.stdout is not None
            async with tail.stdout:
                with trio.fail_after(60):
                    await receive_until(tail.stdout, lambda seen: seen == b"one\n")
                    tail.send_signal(signal.SIGINT)
                    assert await tail.wait() == 130
    finally:
        await release_gate(gate)


async def test_hive_bash_tail_from_end_refuses_an_output_file_replaced_by_a_fifo(
    served: DaemonHandle,
) -> None:
    async with served.session() as session:
        done = structured(await call(session, "run", cmd="echo a", name="tail-fifo", wait_seconds=30))
    stdout = Path(done["stdout"]["path"])
    stdout.unlink()
    os.mkfifo(stdout)  # as a task may leave it: opened blocking, it waits for a writer forever
    with trio.fail_after(60):
        last = await _hive("bash", "tail", "tail-fifo", "--from-end", "2", "--socket", str(served.socket))
    assert last.returncode == 1
    assert last.stderr.decode().splitlines() == [
        f"hive: cannot read the task's output to find its last lines: {stdout} is not a regular file; "
        "move it away, hive keeps its own state files there"
    ]
