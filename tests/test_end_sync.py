"""An end is recorded at once and made durable at the next interval (or at an orderly stop):
the loose end saved as the task started owes it meanwhile, and gets the wake if still owed."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from hive.bash import TaskStore
from tests.helpers.tools import serving_tools


def _loose_end(store: TaskStore, task_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(store.loose_end_path(task_id).read_bytes())
    return data


async def test_an_owed_end_is_recorded_at_once_and_its_wake_saved_at_the_next_interval(
    short_tmp: Path,
) -> None:
    store = TaskStore(short_tmp / "state")
    # No agent socket: the end stays owed. The interval is never reached on its own here.
    async with serving_tools(short_tmp, store=store, output_check_interval=3600) as tools:
        manager = tools.manager
        started = await tools.call("run", {"cmd": "echo finished", "name": "t", "wait_seconds": 0})
        assert not started.is_error, started.text
        task = manager.get("t")
        with trio.fail_after(30):
            await task.recorded.wait()
        record = json.loads(store.record_path("t").read_bytes())
        assert (record["state"], record["exit_code"]) == ("done", 0)
        # Still owed by the loose end saved before the task started (a restart would compose
        # the wake from the final record); the wake itself waits for the interval.
        assert _loose_end(store, "t")["wake"] is None
        await manager.ledger.sync_ends(manager.tasks)
        wake = _loose_end(store, "t")["wake"]
        assert isinstance(wake, dict)
        assert wake["sender"] == "bash-task-t"
        assert "finished" in wake["body"]

        # An end seen just before an orderly stop gets its wake in its loose end at the stop.
        await tools.call("run", {"cmd": "echo last", "name": "u", "wait_seconds": 0})
        with trio.fail_after(30):
            await manager.get("u").recorded.wait()
        assert _loose_end(store, "u")["wake"] is None
    wake = _loose_end(store, "u")["wake"]
    assert isinstance(wake, dict)
    assert "last" in wake["body"]


async def test_an_end_told_before_the_interval_leaves_no_loose_end_to_rewrite(short_tmp: Path) -> None:
    store = TaskStore(short_tmp / "state")
    async with serving_tools(short_tmp, store=store, output_check_interval=3600) as tools:
        manager = tools.manager
        answer = await tools.call("run", {"cmd": "echo inline", "name": "t", "wait_seconds": 30})
        assert answer.structured["state"] == "done"
        assert answer.delivered is not None
        task = manager.get("t")
        with trio.fail_after(30):
            await task.recorded.wait()
        answer.delivered(True)  # the answer reached a client still connected: the end is told
        assert not manager.ledger.owes(task)
        # The removal `delivered` lined up is under way: wait for its end.
        with trio.fail_after(30):
            await manager.ledger.wait_written(task)
        assert not store.loose_end_path("t").exists()
        await manager.ledger.sync_ends(manager.tasks)
        assert not store.loose_end_path("t").exists()
