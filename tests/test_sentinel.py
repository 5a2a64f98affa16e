"""The agents' sentinel (``hive._sentinel``): what it holds of the lines it is told.

Real processes, since what it holds are pidfds adopted by pid and start time; the SIGINT it
sends when a harness dies is shown through the real harness (tests/test_agent_lifetime.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from hive._proc import start_time
from hive._sentinel import held_until_the_end


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes that run until their stdin ends."""
    started: list[subprocess.Popen[bytes]] = []
    with ExitStack() as stack:
        for _ in range(3):
            process = subprocess.Popen(
                [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
            )
            stack.enter_context(process)
            started.append(process)
        yield started
        for process in started:
            assert process.stdin is not None
            process.stdin.close()


def line(process: subprocess.Popen[bytes], shift: int = 0) -> bytes:
    started = start_time(process.pid)
    assert started is not None
    return f"{process.pid} {started + shift}\n".encode()


def test_it_holds_the_agents_still_running_and_lets_go_of_those_that_exited(
    processes: list[subprocess.Popen[bytes]],
) -> None:
    first, second, third = processes

    def lines() -> Iterator[bytes]:
        yield line(first)
        yield b"not a pid\n"
        yield line(second, shift=-1)  # its pid, another start time: a process that reused it
        assert first.stdin is not None
        first.stdin.close()
        first.wait()
        yield line(third)  # the first, exited, is let go here

    held = held_until_the_end(lines())
    assert [pidfd.pid for pidfd in held] == [third.pid]
    assert first.returncode == 0 and second.poll() is None
    for pidfd in held:
        pidfd.close()
