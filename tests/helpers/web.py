"""A real ``hive web`` in a process of its own, on a free loopback port: the line it prints as it
starts (its URL, and where its token is), stopped by SIGINT at the end of the block."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import trio

GUARD = 30


@asynccontextmanager
async def hive_web(
    *args: str | Path, env: Mapping[str, str] | None = None, terminal: bool = False
) -> AsyncIterator[tuple[str, trio.Process]]:
    """``hive web --listen 127.0.0.1:0 ARGS``: the line it printed first and the process; its
    stdout is a pipe, or with ``terminal`` a terminal's (a pseudo-terminal's)."""
    argv = [sys.executable, "-m", "hive.cli", "web", "--listen", "127.0.0.1:0", *map(str, args)]
    environment = {**os.environ, **env} if env is not None else None
    async with AsyncExitStack() as stack:
        if terminal:
            main, tty = os.openpty()
            output: trio.abc.ReceiveStream = trio.lowlevel.FdStream(main)
            await stack.enter_async_context(output)
            try:
                process = await trio.lowlevel.open_process(argv, stdout=tty, env=environment)
            finally:
                os.close(tty)  # the child holds it
        else:
            process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, env=environment)
            assert process.stdout is not None
            output = process.stdout
        try:
            line = b""
            while not line.endswith(b"\n"):
                chunk = await output.receive_some(1)
                assert chunk, f"hive web ended before it printed its address: {line!r}"
                line += chunk
            yield line.decode().strip(), process
        finally:
            process.send_signal(signal.SIGINT)
            with trio.move_on_after(GUARD, shield=True):
                await process.wait()


def base_of(line: str) -> str:
    """The base URL in what ``hive web`` printed (its token, if it carries one, left out)."""
    url = next(word for word in line.split() if word.startswith("http://"))
    return url.split("/?", 1)[0].rstrip("/")
