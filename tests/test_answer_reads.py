"""The output tails that answers and wakes carry are read off the event loop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio

from hive.bash import TAIL_BYTES, Tail, ToolResult, _task_manager
from hive.bash.files import _output
from tests.helpers.tools import serving_tools


class BlockingTails:
    """`read_tail` that fails on the event loop's thread and, once ``block`` is set, waits in
    its worker thread until ``release`` is set (``entered`` says it got there)."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.loop = threading.get_ident()
        self.token = token
        self.block = False
        self.release = threading.Event()
        self.entered = trio.Event()
        self.paths: list[str] = []
        self.real = _task_manager.read_tail

    def __call__(self, path: Path, limit: int = TAIL_BYTES) -> Tail:
        assert threading.get_ident() != self.loop, f"{path} was read on the event loop"
        self.paths.append(path.name)
        if self.block:
            self.token.run_sync_soon(self.entered.set)
            self.release.wait(30)
        return self.real(path, limit)


async def test_tails_for_status_answers_and_wakes_are_read_off_the_event_loop(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tails = BlockingTails(trio.lowlevel.current_trio_token())
    monkeypatch.setattr(_task_manager, "read_tail", tails)  # the wakes'
    monkeypatch.setattr(_output, "read_tail", tails)  # the answers'
    async with serving_tools(short_tmp) as tools, trio.open_nursery() as nursery:
        started = await tools.call(
            "run", {"cmd": "echo hello; echo oops >&2", "name": "t", "wait_seconds": 0}
        )
        assert not started.is_error, started.text
        task = tools.manager.get("t")
        with trio.fail_after(30):
            await task.ended.wait()
        # Its end was owed (wait_seconds=0): the wake was composed with its stdout's tail.
        assert task.owed_wake is not None
        assert "hello" in task.owed_wake.body
        assert tails.paths == ["t.out"]

        tails.block = True
        answers: list[ToolResult] = []
        answered = trio.Event()

        async def status() -> None:
            answers.append(await tools.call("status", {"id": "t"}))
            answered.set()

        nursery.start_soon(status)
        with trio.fail_after(30):
            await tails.entered.wait()
        # The status answer waits on its tails in a worker thread; the loop still serves.
        listing = await tools.call("list", {})
        assert listing.structured["tasks"][0]["id"] == "t"
        assert answers == []
        tails.release.set()
        with trio.fail_after(30):
            await answered.wait()
        (answer,) = answers
        assert answer.structured["stdout"]["tail"] == "hello\n"
        assert answer.structured["stderr"]["tail"] == "oops\n"
        assert sorted(tails.paths) == ["t.err", "t.out", "t.out"]
