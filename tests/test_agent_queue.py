"""The queue's file (hive.agent._queue): what a restart replays, a cut-off last line, rewrites."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import trio
import trio.testing
from hypothesis import given

from hive.agent._harness_files import (
    Added,
    Base,
    Carried,
    Compacted,
    CompactRequested,
    Record,
    decode_record,
    encode,
)
from hive.agent._model import Item, ItemKind
from hive.agent._queue import QueueFile, load, open_queue_file, replay, shortest
from tests.helpers.strategies import queue_operations


def item(seq: int, end_id: str | None = None) -> Item:
    return Item(ItemKind.WAKE, f"bash-task-{seq}", f"body {seq}", end_id, at=1.5, seq=seq)


def test_records_round_trip_with_from_on_the_wire() -> None:
    added = Added(item(3, "t:1"))
    wire = json.loads(encode(added))
    assert wire == {
        "op": "add",
        "item": {
            "seq": 3,
            "kind": "wake",
            "from": "bash-task-3",
            "body": "body 3",
            "end_id": "t:1",
            "at": 1.5,
        },
    }
    records = (
        added,
        Added(item(4)),
        Carried((1, 2)),
        Base(next_seq=9, seen=("a:1",), compact=("agent",)),
        CompactRequested("operator"),
        Compacted(),
    )
    for record in records:
        assert decode_record(encode(record)) == record
    assert json.loads(encode(CompactRequested("agent"))) == {"op": "compact", "by": "agent"}
    assert json.loads(encode(Compacted())) == {"op": "compacted"}


def test_a_compaction_is_owed_from_its_request_until_one_has_ended() -> None:
    assert replay([CompactRequested("operator")]).compact == ("operator",)
    asked_twice = [CompactRequested("agent"), CompactRequested("operator"), CompactRequested("agent")]
    assert replay(asked_twice).compact == ("agent", "operator")
    assert replay([*asked_twice, Compacted()]).compact == ()
    assert replay([*asked_twice, Compacted(), CompactRequested("operator")]).compact == ("operator",)
    assert replay([CompactRequested("agent"), Base(next_seq=1, compact=("operator",))]).compact == (
        "operator",
    )


def test_replay_keeps_what_was_added_and_not_carried() -> None:
    state = replay([Added(item(1, "e1")), Added(item(2)), Added(item(3)), Carried((1, 3)), Added(item(4))])
    assert [i.seq for i in state.queued] == [2, 4]
    assert state.seen == ("e1",)
    assert (state.next_seq, state.written_seq) == (5, 4)


def test_a_wake_shown_in_a_turn_replays_as_an_ordinary_wake_unless_that_turn_carried_it_away() -> None:
    shown = attrs.evolve(item(2, "t:2"), shown_at=4.5)
    assert json.loads(encode(Added(shown)))["item"]["shown_at"] == 4.5
    assert decode_record(encode(Added(shown))) == Added(shown)
    state = replay([Added(item(1)), Added(shown)])
    assert [(i.seq, i.shown) for i in state.queued] == [(1, False), (2, False)]
    state = replay([Added(item(1)), Added(shown), Carried((1, 2))])
    assert state.queued == () and state.seen == ("t:2",)


def test_a_base_starts_over_from_what_it_remembers() -> None:
    state = replay([Added(item(1)), Base(next_seq=7, seen=("x:1",)), Added(item(7))])
    assert [i.seq for i in state.queued] == [7]
    assert state.seen == ("x:1",)
    assert state.next_seq == 8


async def test_a_last_line_cut_off_by_a_crash_is_dropped_and_the_next_write_starts_clean(
    tmp_path: Path,
) -> None:
    path = tmp_path / "queue"
    path.write_bytes(encode(Added(item(1))) + encode(Added(item(2)))[:20])
    queue, state = await open_queue_file(path)
    try:
        assert [i.seq for i in state.queued] == [1]
        await queue.append([Added(item(2))])
    finally:
        queue.close()
    assert [i.seq for i in replay(load(path)[0]).queued] == [1, 2]


async def test_a_damaged_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "queue"
    path.write_bytes(encode(Added(item(1))) + b"not a record\n" + encode(Added(item(2))))
    records, _ = load(path)
    assert [r.item.seq for r in records if isinstance(r, Added)] == [1, 2]


async def test_the_file_is_private_and_a_rewrite_keeps_the_queue_and_the_ends(tmp_path: Path) -> None:
    path = tmp_path / "queue"
    queue, _ = await open_queue_file(path)
    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        await queue.append([Added(item(n, f"e{n}")) for n in range(1, 6)])
        await queue.append([Carried((1, 2))])
        await queue.append([CompactRequested("agent")])
        await queue.rewrite()
        await queue.append([Added(item(6))])
    finally:
        queue.close()
    records = load(path)[0]
    assert isinstance(records[0], Base)
    again = replay(records)
    assert [i.seq for i in again.queued] == [3, 4, 5, 6]
    assert again.seen == ("e1", "e2")
    assert again.next_seq == 7
    assert again.compact == ("agent",)


async def test_a_rewrite_waiting_on_a_write_keeps_what_that_write_added(tmp_path: Path) -> None:
    # The harness asks for a rewrite while an arrival's append is under way: the messages that
    # append acknowledges must not be rewritten away.
    path = tmp_path / "queue"
    queue, _ = await open_queue_file(path)
    try:
        await queue.append([Added(item(1)), Carried((1,))])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(queue.append, [Added(item(2)), CompactRequested("operator")])
            await trio.testing.wait_all_tasks_blocked()  # the append holds the file
            await queue.rewrite()
    finally:
        queue.close()
    records = load(path)[0]
    assert isinstance(records[0], Base)
    state = replay(records)
    assert [i.seq for i in state.queued] == [2]
    assert state.compact == ("operator",)


@given(queue_operations)
def test_a_rewrite_replays_to_the_same_state(operations: list[tuple[object, ...]]) -> None:
    records: list[Record] = []
    seq = 0
    for op in operations:
        if op[0] == "add":
            seq += 1
            end = op[1]
            records.append(Added(item(seq, f"{end}{seq}" if isinstance(end, str) else None)))
        elif op[0] == "compact":
            records.append(CompactRequested(str(op[1])))
        elif op[0] == "compacted":
            records.append(Compacted())
        elif seq:
            records.append(Carried((seq,)))
    state = replay(records)
    assert replay(shortest(state)) == state


def test_wants_a_rewrite_only_once_it_has_grown(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "q", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        small = QueueFile(tmp_path / "q", fd, 1000, 1000)
        assert not small.wants_rewrite()
        big = QueueFile(tmp_path / "q", fd, 200_000, 50_000)
        assert big.wants_rewrite()
    finally:
        os.close(fd)


async def test_what_the_last_turn_delivered_is_carried_when_its_line_never_reached_the_queue(
    tmp_path: Path,
) -> None:
    # A harness killed between a turn's record (durable) and the queue's `carried` line: the
    # restart must not carry those messages a second time.
    from hive.agent._harness_files import TurnRecord
    from hive.agent._queue import carried_by, carry

    path = tmp_path / "queue"
    queue, _ = await open_queue_file(path)
    await queue.append([Added(item(1, "e1")), Added(item(2)), Added(item(3))])
    queue.close()
    queue, state = await open_queue_file(path)
    last = TurnRecord(turn=4, kind="turn", started=1.0, ended=2.0, carried=(item(1, "e1"), item(2)))
    assert carried_by(state, last) == (1, 2)
    for not_delivered in (
        attrs.evolve(last, delivered=False, outcome="stopped"),
        attrs.evolve(last, kind="compact", carried=()),
        None,
    ):
        assert carried_by(state, not_delivered) == ()
    after = carry(state, (1, 2))
    assert [i.seq for i in after.queued] == [3] and after.seen == ("e1",)
    await queue.append([Carried((1, 2))])
    queue.close()
    queue, replayed = await open_queue_file(path)
    queue.close()
    assert (replayed.queued, replayed.seen) == (after.queued, after.seen)
    assert carried_by(replayed, last) == ()
