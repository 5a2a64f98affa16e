"""``hive-agent`` with its state on a small disk that fills during a turn: the turn's closing
record waits for room instead of being dropped, so the turn log keeps the message it carried and
its cost."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from hive.agent._room import write_when_room
from hive.agent_socket import Prompt, open_agent_connection
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.harness import GUARD, claude_env, claude_start, release, running_agent, wait_line
from tests.helpers.inotify import wait_until
from tests.helpers.small_disk import can_mount_tmpfs, small_disk

COST = 0.0197
BODY = "count this " * 1000
"""Larger than a page: the turn's record, which carries it, cannot go in what is left of the turn
log's last page (a full tmpfs still takes a write into a page a file already has)."""


def _past_the_record(agent_stderr: str, queue: Path) -> str | None:
    """What the harness did once past the turn's record: it waits for room now; before, it
    dropped the record and went on to take the message out of the queue's file."""
    if "waits for room" in agent_stderr:
        return "waited"
    if "could not write the queue" in agent_stderr or b'"carried"' in queue.read_bytes():
        return "went on"
    return None


@pytest.mark.skipif(not can_mount_tmpfs(), reason="needs unshare, nsenter and a mountable tmpfs")
async def test_a_turns_end_waits_for_room_on_a_full_disk_and_keeps_its_message_and_cost(
    root: Path, fake: FakeClaude
) -> None:
    fake.script(
        [{"init": {}}, {"wait_for_signal": "SIGUSR1"}, {"text": "done"}, {"result": {"total_cost_usd": COST}}]
    )
    with trio.fail_after(GUARD), small_disk(root / "state") as disk:
        async with running_agent(root, claude_env(fake), wrapper=disk.wrapper) as agent:
            socket, state = disk.outside(agent.socket), disk.outside(agent.state)
            async with open_agent_connection(socket) as connection:
                assert (await connection.request(Prompt(BODY))).ok
            start = await claude_start(fake, 1)
            disk.fill()
            await release(fake, start)
            past = await wait_until(lambda: _past_the_record(agent.stderr(), state / "queue"), root, state)
            assert past == "waited", agent.stderr()
            async with open_agent_connection(socket) as connection:
                waiting = await connection.status()
            disk.free()
            record = await wait_line(state / "turns.jsonl", lambda o: o.get("type") == "hive")
            # The message leaves the queue once its turn's record is written (the harness's own
            # state follows in a moment that no file shows, so its status is not asked here).
            carried = await wait_line(state / "queue", lambda o: o.get("op") == "carried")
    assert (waiting.state, waiting.running_turn, waiting.last_turn) == ("turn", 1, None)
    assert (record["turn"], record["outcome"], record["delivered"]) == (1, "completed", True)
    assert [c["body"] for c in record["carried"]] == [BODY]
    assert record["cost_usd"] == COST
    assert carried["seqs"] == [c["seq"] for c in record["carried"]]


def _refusing(errors: list[OSError], wrote: list[int]) -> Callable[[], None]:
    """A write that raises each of ``errors`` in turn, then succeeds (counted in ``wrote``)."""

    def write() -> None:
        if errors:
            raise errors.pop(0)
        wrote.append(1)

    return write


FULL = OSError(errno.ENOSPC, "No space left on device")


async def test_room_made_elsewhere_on_the_disk_is_found_by_trying_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    wrote: list[int] = []
    told: list[OSError] = []
    started = trio.current_time()
    await write_when_room(tmp_path, _refusing([FULL, FULL, FULL], wrote), told.append, retry=5.0)
    assert (wrote, told) == ([1], [FULL])
    assert trio.current_time() - started == 10.0  # tried at once, then after 5 s and 10 s


async def test_a_file_removed_beside_it_ends_the_wait_at_once(tmp_path: Path) -> None:
    filler = tmp_path / "filler"
    filler.write_bytes(b"x")
    wrote: list[int] = []
    waiting = trio.Event()

    async def free_room() -> None:
        await waiting.wait()
        filler.unlink()

    with trio.fail_after(60):  # a guard: the retry is an hour, so only the removal ends the wait
        async with trio.open_nursery() as nursery:
            nursery.start_soon(free_room)
            await write_when_room(
                tmp_path, _refusing([FULL, FULL], wrote), lambda _: waiting.set(), retry=3600.0
            )
    assert wrote == [1]


async def test_another_error_than_a_full_disk_is_raised(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="Input/output"):
        await write_when_room(
            tmp_path, _refusing([FULL, OSError(errno.EIO, "Input/output error")], []), print
        )
