"""The wake courier's retries, on virtual time: backoff while the agent socket is away, order and
exactly-once acknowledgement once it is back."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio
import trio.testing

from hive import agent_socket as _courier
from hive.agent_socket import AgentRequest, Wake, WakeCourier, serve_agent_socket


def _count_connections(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When (on the clock) each connection to an agent socket is opened, from now on."""
    opened: list[float] = []
    real_open = _courier.open_agent_connection

    def counting_open(path: Path) -> object:
        opened.append(trio.current_time())
        return real_open(path)

    monkeypatch.setattr(_courier, "open_agent_connection", counting_open)
    return opened


async def test_backoff_doubles_to_its_cap_then_every_wake_is_delivered_in_order(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    socket_path = short_tmp / "agent.sock"
    attempts = _count_connections(monkeypatch)
    courier = WakeCourier[tuple[str, str]](agent_socket=socket_path, retry_initial=0.1, retry_max=1.0)
    acked: list[tuple[str, str]] = []
    received: list[Wake] = []
    arrived, all_acked = trio.Event(), trio.Event()

    async def on_acked(key: tuple[str, str]) -> None:
        acked.append(key)
        if len(acked) == 4:
            all_acked.set()

    async def take(request: AgentRequest) -> None:
        assert isinstance(request, Wake)
        received.append(request)
        if len(received) == 3:
            arrived.set()

    async with trio.open_nursery() as nursery:
        courier.start(nursery, on_acked)
        start = trio.current_time()
        for i in range(3):
            courier.send(
                (f"t{i}", f"s{i}"), courier.agent_socket, Wake(sender=f"bash-task-t{i}", body=f"body {i}")
            )
        await trio.sleep(5.0)  # virtual: the socket is away all this time
        gaps = [round(b - a, 6) for a, b in itertools.pairwise(attempts)]
        assert attempts[0] == start
        assert gaps[:5] == [0.1, 0.2, 0.4, 0.8, 1.0]
        assert set(gaps[4:]) == {1.0}
        assert courier.pending() == [("t0", "s0"), ("t1", "s1"), ("t2", "s2")]
        await nursery.start(serve_agent_socket, socket_path, take)
        await arrived.wait()
        assert [w.sender for w in received] == ["bash-task-t0", "bash-task-t1", "bash-task-t2"]
        before = len(attempts)
        await trio.sleep(30.0)  # nothing is owed now: no more attempts
        assert len(attempts) == before
        courier.send(("t3", "s3"), courier.agent_socket, Wake(sender="bash-task-t3", body="later"))
        with trio.fail_after(0.01):  # virtual: at once, with no backoff left from before
            await all_acked.wait()
        nursery.cancel_scope.cancel()
    assert acked == [("t0", "s0"), ("t1", "s1"), ("t2", "s2"), ("t3", "s3")]
    assert len(received) == 4


async def test_a_withdrawn_wake_is_not_sent(short_tmp: Path, autojump_clock: trio.testing.MockClock) -> None:
    socket_path = short_tmp / "agent.sock"
    received: list[str] = []

    async def take(request: AgentRequest) -> None:
        assert isinstance(request, Wake)
        received.append(request.sender)

    courier = WakeCourier[tuple[str, str]](agent_socket=socket_path, retry_initial=0.5, retry_max=0.5)
    acked: list[str] = []
    b_acked = trio.Event()

    async def on_acked(key: tuple[str, str]) -> None:
        acked.append(key[0])
        if key[0] == "b":
            b_acked.set()

    async with trio.open_nursery() as nursery:
        courier.start(nursery, on_acked)
        courier.send(("a", "1"), courier.agent_socket, Wake(sender="bash-task-a", body=""))
        courier.send(("b", "1"), courier.agent_socket, Wake(sender="bash-task-b", body=""))
        await trio.sleep(1.0)
        courier.withdraw(("a", "1"))  # a status call told the agent
        await nursery.start(serve_agent_socket, socket_path, take)
        with trio.fail_after(2.0):  # virtual: the next retry, 0.5 s on
            await b_acked.wait()
        nursery.cancel_scope.cancel()
    assert received == ["bash-task-b"]
    assert acked == ["b"]


async def test_without_an_agent_socket_nothing_is_sent_and_wakes_stay_owed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    courier = WakeCourier[tuple[str, str]]()

    async def on_acked(key: tuple[str, str]) -> None:
        raise AssertionError("nothing can be acknowledged without a socket")

    async with trio.open_nursery() as nursery:
        courier.start(nursery, on_acked)
        courier.send(("a", "1"), courier.agent_socket, Wake(sender="bash-task-a", body=""))
        await trio.sleep(3600)
        nursery.cancel_scope.cancel()
    assert courier.pending() == [("a", "1")]


async def test_a_wake_owed_once_the_lent_nursery_has_closed_stays_owed(
    short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The bash daemon's last sync, after its nursery has closed on a cancel from outside, can
    owe wakes: they stay owed (on disk, for the next start), and owing them raises nothing."""
    courier = WakeCourier[str](agent_socket=short_tmp / "agent.sock")
    with trio.CancelScope() as outside:
        async with trio.open_nursery() as nursery:
            courier.start(nursery)
            courier.send("a", courier.agent_socket, Wake(sender="bash-task-a", body=""))
            outside.cancel()
    courier.send("b", courier.agent_socket, Wake(sender="bash-task-b", body=""))
    assert courier.pending() == ["a", "b"]


async def test_a_socket_nobody_listens_on_holds_up_no_wake_to_another(
    short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    absent, live = short_tmp / "absent.sock", short_tmp / "live.sock"
    acked: list[str] = []
    received: list[str] = []
    arrived = trio.Event()

    async def take(request: AgentRequest) -> None:
        assert isinstance(request, Wake)
        received.append(request.sender)
        arrived.set()

    courier = WakeCourier[str](on_acked=acked.append, retry_initial=0.1, retry_max=1.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, live, take)
        courier.start(nursery)
        courier.send("a:1", absent, Wake(sender="subagent-a", body="to nobody"))
        courier.send("b:1", live, Wake(sender="subagent-b", body="to the live one"))
        with trio.fail_after(1.0):  # virtual: well before the absent socket's second retry
            await arrived.wait()
        await trio.sleep(30.0)
        nursery.cancel_scope.cancel()
    assert received == ["subagent-b"]
    assert acked == ["b:1"]
    assert courier.pending() == ["a:1"]


async def test_a_connection_is_kept_open_for_the_wakes_that_follow_and_replaced_at_once_when_the_agent_restarts(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A wake owed while the last one's connection is kept open goes out on it (no new
    connection wakes the agent first); after ``keep_open`` idle the connection is closed; a kept
    connection the agent dropped (it restarted) is replaced at once, with no backoff."""
    socket_path = short_tmp / "agent.sock"
    opened = _count_connections(monkeypatch)
    courier = WakeCourier[tuple[str, str]](
        agent_socket=socket_path, retry_initial=5.0, retry_max=5.0, keep_open=10.0
    )
    received: list[tuple[str, float]] = []
    arrived = trio.Event()

    async def take(request: AgentRequest) -> None:
        nonlocal arrived
        assert isinstance(request, Wake)
        received.append((request.sender, trio.current_time()))
        arrived.set()

    async def wake_and_wait(task: str) -> float:
        nonlocal arrived
        arrived = trio.Event()
        owed_at = trio.current_time()
        courier.send((task, "s"), courier.agent_socket, Wake(sender=f"bash-task-{task}", body=task))
        await arrived.wait()
        return received[-1][1] - owed_at

    async with trio.open_nursery() as nursery:
        agent = trio.CancelScope()

        async def serve_agent(
            task_status: trio.TaskStatus[trio.SocketListener] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            with agent:
                await serve_agent_socket(socket_path, take, task_status=task_status)

        await nursery.start(serve_agent)
        courier.start(nursery)
        assert await wake_and_wait("t1") == 0
        await trio.sleep(5.0)  # idle, less than keep_open
        assert await wake_and_wait("t2") == 0
        assert len(opened) == 1  # t2 went out on t1's connection

        await trio.sleep(11.0)  # idle past keep_open: the connection is closed
        assert await wake_and_wait("t3") == 0
        assert len(opened) == 2

        # The agent restarts while the connection is kept: the next wake fails on it, then goes
        # out at once on a new one (not after the 5 s backoff).
        agent.cancel()
        await trio.testing.wait_all_tasks_blocked()
        agent = trio.CancelScope()
        await nursery.start(serve_agent)
        assert await wake_and_wait("t4") == 0
        assert len(opened) == 3
        nursery.cancel_scope.cancel()
    assert [sender for sender, _ in received] == [
        "bash-task-t1",
        "bash-task-t2",
        "bash-task-t3",
        "bash-task-t4",
    ]
