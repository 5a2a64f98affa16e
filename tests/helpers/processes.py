"""Waiting for a process, ours or not, to exit (on a pidfd)."""

from __future__ import annotations

import os

import trio


async def wait_exited(pid: int) -> None:
    """Until process ``pid`` has exited (at once if there is none)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
