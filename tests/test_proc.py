"""hive._proc: /proc stat lines parsed whatever the command name holds; pidfd adoption, exit
waits and SIGINT to a group, on real child processes where only a process can show it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hive._proc import (
    ChildExit,
    GroupLeader,
    Pidfd,
    ProcStat,
    is_same_process,
    parse_stat,
    read_stat,
    signal_group,
    start_time,
    wait_exit,
)

# The kernel keeps at most 15 bytes of a command name, any byte but NUL: spaces, parentheses
# and newlines included.
comm_names = st.one_of(
    st.sampled_from([b"a) b (c", b")", b"(", b") (", b"x) S 1 2 3", b"\n)\n", b"", b"cat"]),
    st.binary(max_size=15).map(lambda name: name.replace(b"\0", b"?")),
)
numbers = st.integers(0, 2**31)


def stat_line(pid: int, comm: bytes, state: bytes, ppid: int, pgid: int, started: int) -> bytes:
    # Fields 3 to 52 as a kernel writes them: 22 is the start time.
    rest = [state, str(ppid).encode(), str(pgid).encode()] + [b"0"] * 16 + [str(started).encode()]
    rest += [b"7"] * 30
    return str(pid).encode() + b" (" + comm + b") " + b" ".join(rest) + b"\n"


@given(numbers, comm_names, st.sampled_from([b"R", b"S", b"D", b"Z", b"T"]), numbers, numbers, numbers)
def test_a_stat_line_is_parsed_whatever_its_command_name_holds(
    pid: int, comm: bytes, state: bytes, ppid: int, pgid: int, started: int
) -> None:
    parsed = parse_stat(stat_line(pid, comm, state, ppid, pgid, started))
    assert parsed == ProcStat(pid, comm, state, ppid, pgid, started)
    assert parsed.zombie == (state == b"Z")


@given(st.binary(max_size=80))
def test_what_is_not_a_stat_line_is_a_value_error(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        parse_stat(data)


@given(comm_names)
def test_a_stat_line_cut_short_is_a_value_error(comm: bytes) -> None:
    line = stat_line(1, comm, b"S", 1, 1, 5)
    cut = line[: line.rindex(b")") + 20]
    with pytest.raises(ValueError, match="fields"):
        parse_stat(cut)


def test_this_process_reads_as_itself() -> None:
    me = read_stat(os.getpid())
    assert me is not None
    assert (me.pid, me.ppid, me.pgid, me.zombie) == (os.getpid(), os.getppid(), os.getpgid(0), False)
    assert start_time(os.getpid()) == me.start_time
    assert is_same_process(os.getpid(), me.start_time)
    assert not is_same_process(os.getpid(), me.start_time + 1)
    assert not is_same_process(os.getpid(), None)


def no_such_pid() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_no_such_process_has_no_stat_and_no_group() -> None:
    assert read_stat(no_such_pid()) is None
    assert start_time(no_such_pid()) is None
    assert Pidfd.adopt(no_such_pid(), 1) is None
    assert not signal_group(no_such_pid())


@pytest.fixture
def cat() -> Iterator[subprocess.Popen[bytes]]:
    """A child that runs until its stdin closes (or a signal ends it), leading its own group."""
    child = subprocess.Popen(
        ["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def end(child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None
    child.stdin.close()


async def test_an_adopted_process_is_awaited_until_it_exits(cat: subprocess.Popen[bytes]) -> None:
    pidfd = Pidfd.adopt(cat.pid, start_time(cat.pid))
    assert pidfd is not None
    with pidfd:
        assert not pidfd.exited()
        async with trio.open_nursery() as nursery:
            exited = trio.Event()

            async def waiter() -> None:
                await pidfd.wait()
                exited.set()

            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert not exited.is_set()
            end(cat)
        assert pidfd.exited()  # a zombie: exited, not reaped yet
        assert read_stat(cat.pid) is not None
    assert pidfd.closed and pidfd.exited()


async def test_a_pid_with_another_start_time_is_not_adopted(cat: subprocess.Popen[bytes]) -> None:
    started = start_time(cat.pid)
    assert started is not None
    before = len(os.listdir("/proc/self/fd"))
    assert Pidfd.adopt(cat.pid, started + 1) is None
    assert Pidfd.adopt(cat.pid, None) is None
    assert len(os.listdir("/proc/self/fd")) == before  # the pidfd it opened to check is closed
    assert not await wait_exit(cat.pid, started + 1)


async def test_wait_exit_waits_for_the_recorded_process_and_not_for_a_gone_one(
    cat: subprocess.Popen[bytes],
) -> None:
    started = start_time(cat.pid)
    async with trio.open_nursery() as nursery:
        waited: list[bool] = []

        async def waiter() -> None:
            waited.append(await wait_exit(cat.pid, started))

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert waited == []
        end(cat)
    assert waited == [True]
    cat.wait()
    assert not await wait_exit(cat.pid, started)


async def test_closing_a_pidfd_wakes_its_waiter(cat: subprocess.Popen[bytes]) -> None:
    pidfd = Pidfd.of_child(cat.pid)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pidfd.wait)
        await trio.testing.wait_all_tasks_blocked()
        pidfd.close()
    assert cat.poll() is None  # it still runs: the waiter woke up because the pidfd was closed
    assert not pidfd.send_signal(0)
    pidfd.close()  # twice: nothing


async def test_a_group_leader_gets_sigint_once_and_none_once_it_is_gone(cat: subprocess.Popen[bytes]) -> None:
    exit_ = ChildExit(cat)
    leader = GroupLeader(exit_.pidfd)
    assert leader.pid == cat.pid
    assert leader.interrupt()
    assert leader.signalled
    assert not leader.interrupt()  # once
    assert await exit_.wait() == -signal.SIGINT
    assert exit_.pidfd.closed
    assert not GroupLeader(exit_.pidfd).interrupt()  # reaped: its group id may be another's


async def test_a_leader_adopted_as_signalled_is_not_signalled_again(cat: subprocess.Popen[bytes]) -> None:
    pidfd = Pidfd.adopt(cat.pid, start_time(cat.pid))
    assert pidfd is not None
    with pidfd:
        assert not GroupLeader(pidfd, signalled=True).interrupt()
    assert cat.poll() is None


async def test_a_child_exit_is_awaited_by_several_tasks_and_reaped_once(cat: subprocess.Popen[bytes]) -> None:
    exit_ = ChildExit(cat)
    assert exit_.returncode is None
    statuses: list[int] = []

    async def waiter() -> None:
        statuses.append(await exit_.wait())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert statuses == []
        assert exit_.returncode is None
        end(cat)
    assert statuses == [0, 0]
    assert exit_.returncode == 0
    assert exit_.pidfd.closed


async def test_a_child_exit_seen_by_returncode_closes_its_pidfd(cat: subprocess.Popen[bytes]) -> None:
    exit_ = ChildExit(cat)
    end(cat)
    await exit_.pidfd.wait()
    assert exit_.returncode == 0
    assert exit_.pidfd.closed
    assert await exit_.wait() == 0
