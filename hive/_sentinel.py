"""The agents' sentinel: SIGINT to every agent's whole process group when the harness dies.

The kernel's parent-death signal reaches one process, the agent's first: a wrapper script that
runs claude without ``exec`` gets it, and claude, the shell's foreground child, does not (a
shell waiting on a child does not pass SIGINT on). The harness runs this program once, with a
pipe as its stdin, and writes a line to it for each agent it spawns: the pid of the agent's
first process (which leads the agent's process group) and its start time (``hive._proc``).
When the pipe ends, the harness is gone (the kernel closes its end however it died) or has
stopped; then every agent still running gets SIGINT to its process group, as a turn's stop
sends it, and the sentinel exits.

It runs in a session of its own (a terminal's Ctrl-C to the harness's group does not reach it)
and ignores SIGINT. It is started with ``python -I -S`` and imports only ``hive._proc``: no
site-packages, no Trio, a few MB, for the harness's whole life.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterable

from hive._proc import Pidfd


def held_until_the_end(lines: Iterable[bytes]) -> list[Pidfd]:
    """The agents named in ``lines`` (``pid start_time``) still running at their end: each
    adopted as it is read (so that its pid reused later is not taken for it), and those that
    have exited let go at each new line, so that a long-lived harness's many turns hold none."""
    held: list[Pidfd] = []
    for line in lines:
        try:
            pid, started = (int(field) for field in line.split())
        except ValueError:
            print(
                f"hive agent sentinel: ignored a line that is not 'pid start_time': {line[:80]!r}",
                file=sys.stderr,
            )
            continue
        for gone in [pidfd for pidfd in held if pidfd.exited()]:
            gone.close()
            held.remove(gone)
        if (pidfd := Pidfd.adopt(pid, started)) is not None:
            held.append(pidfd)
    return held


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    held = held_until_the_end(sys.stdin.buffer)
    sent = [pidfd.pid for pidfd in held if pidfd.signal_group(signal.SIGINT)]
    if sent:
        groups = ", ".join(map(str, sent))
        print(
            f"hive agent sentinel: the harness is gone; sent SIGINT to the process group of each agent it "
            f"left running ({groups})",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
