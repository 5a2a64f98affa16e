"""The harness's supervision of its daemons, in-process: fake daemons on a virtual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hive.agent._supervise import Backoff, exit_text, supervise
from hive.agent_socket import DaemonHealth
from hive.bash import DaemonFailedToStart


@attrs.define(eq=False)
class FakeDaemon:
    pid: int
    exited: trio.Event = attrs.field(factory=trio.Event)
    status: int = 0
    stopped: bool = False
    """Its block ended while it ran: the SIGINT a stop sends."""

    def die(self, status: int) -> None:
        self.status = status
        self.exited.set()

    async def wait(self) -> int:
        await self.exited.wait()
        return self.status


@attrs.define(eq=False)
class FakeStarts:
    """Starts fake daemons (pids 100, 101, ...), failing the starts it is told to fail."""

    failing: set[int] = attrs.field(factory=set)
    killed: set[int] = attrs.field(factory=set)
    """Starts whose daemon another process kills (SIGKILL) before it is ready."""
    daemons: list[FakeDaemon] = attrs.field(factory=list)
    started_at: list[float] = attrs.field(factory=list)
    attempts: int = 0
    new: trio.Event = attrs.field(factory=trio.Event)

    def __call__(self) -> AbstractAsyncContextManager[FakeDaemon]:
        return self._start()

    @asynccontextmanager
    async def _start(self) -> AsyncIterator[FakeDaemon]:
        self.attempts += 1
        self.started_at.append(trio.current_time())
        if self.attempts in self.failing:
            raise DaemonFailedToStart("hive-bash-daemon exited with status 2 before it was ready")
        if self.attempts in self.killed:
            raise DaemonFailedToStart("hive-bash-daemon exited with status -9 before it was ready", signal=9)
        daemon = FakeDaemon(99 + self.attempts)
        self.daemons.append(daemon)
        self.new.set()
        self.new = trio.Event()
        try:
            yield daemon
        finally:
            daemon.stopped = not daemon.exited.is_set()

    async def next_daemon(self) -> FakeDaemon:
        await self.new.wait()
        return self.daemons[-1]


@given(st.lists(st.floats(0, 1000), max_size=20))
def test_the_backoff_doubles_from_half_a_second_to_30_and_a_long_run_resets_it(runs: list[float]) -> None:
    backoff = Backoff()
    delay = None
    for ran in runs:
        before = delay
        delay = backoff.next(delay, ran)
        if before is None or ran >= 60:
            assert delay == 0.5
        else:
            assert delay == min(before * 2, 30)


def test_an_exit_says_its_signal_or_status() -> None:
    assert exit_text(-9) == "killed by SIGKILL"
    assert exit_text(1) == "exited with status 1"


async def test_a_daemon_that_dies_is_started_again_after_a_doubling_backoff_and_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = FakeStarts(failing={3})
    reports: list[DaemonHealth] = []
    async with trio.open_nursery() as nursery:
        pid = await nursery.start(partial(supervise, "hive-bash-daemon", starts, reports.append))
        assert pid == 100 and reports[-1].state == "running" and reports[-1].pid == 100
        starts.daemons[0].die(-9)
        second = await starts.next_daemon()
        assert reports[1].state == "down" and reports[1].last_exit == "killed by SIGKILL"
        assert reports[1].restart_at is not None and reports[1].restart_at - reports[1].since == 0.5
        assert (reports[2].state, reports[2].pid, reports[2].restarts) == ("running", 101, 1)
        second.die(1)
        third = await starts.next_daemon()  # the third start fails: the fourth is next
        nursery.cancel_scope.cancel()
    gaps = [b - a for a, b in zip(starts.started_at, starts.started_at[1:], strict=False)]
    assert gaps == pytest.approx([0.5, 1.0, 2.0])  # died at once, died at once, did not start
    assert [r.state for r in reports] == ["running", "down", "running", "down", "down", "running"]
    assert reports[3].last_exit == "exited with status 1"
    assert reports[4].last_exit is not None and reports[4].last_exit.startswith("did not start: ")
    assert reports[5].restarts == 3 and reports[5].last_exit == reports[4].last_exit
    assert third.stopped and not second.stopped  # the cancelled supervision stopped the one running


async def test_a_daemon_that_ran_a_while_is_started_again_after_the_first_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts = FakeStarts()
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(supervise, "d", starts, lambda _: None))
        starts.daemons[0].die(1)
        (await starts.next_daemon()).die(1)  # delay 0.5, then 1
        steady = await starts.next_daemon()
        await trio.sleep(Backoff().steady)  # the event is the run itself: as long as resets the backoff
        died = trio.current_time()
        steady.die(1)
        await starts.next_daemon()
        nursery.cancel_scope.cancel()
    assert starts.started_at[-1] - died == pytest.approx(0.5)


async def test_a_first_start_that_fails_is_raised_not_retried(autojump_clock: trio.testing.MockClock) -> None:
    starts = FakeStarts(failing={1})
    with pytest.raises(DaemonFailedToStart):
        await supervise("d", starts, lambda _: None)
    assert starts.attempts == 1


async def test_a_first_start_that_a_signal_ended_is_retried(autojump_clock: trio.testing.MockClock) -> None:
    """Killed before it was ready (an operator's or an OOM killer's SIGKILL while the harness
    starts) is no bad setting: it is started again, and the harness serves."""
    starts = FakeStarts(killed={1})
    async with trio.open_nursery() as nursery:
        pid = await nursery.start(partial(supervise, "d", starts, lambda _: None))
        assert (pid, starts.attempts) == (101, 2)
        nursery.cancel_scope.cancel()
