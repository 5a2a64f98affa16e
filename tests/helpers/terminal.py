"""The README's shell examples, and one bash to type them into as a person would.

A block the README marks with ``<!-- readme-test: NAME -->`` (just before its ```` ```sh ````
fence) is one of the examples a test runs as written. `Terminal` runs them in one bash, a line at
a time: the script comes on a pipe of its own, so a command that reads its stdin reads the null
device (nobody types into it), not the lines that follow. A line ending in ``&`` starts a program
in the background; the next line is typed once that program says it is ready (``READY=1`` on
``NOTIFY_SOCKET``, as systemd hears it), as a person waits for it to come up.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MARK = re.compile(r"<!-- readme-test: ([\w-]+) -->\n```sh\n(.*?)\n```", re.DOTALL)
INSTALL = "python3 -m venv"
"""How the README's install line starts: the venv running the tests stands in for it."""


def readme_blocks(readme: Path = README) -> dict[str, list[str]]:
    """The README's marked blocks, by name: their command lines, comments and blank lines left out."""
    blocks = {}
    for name, body in MARK.findall(readme.read_text()):
        blocks[name] = [command for line in body.splitlines() if (command := without_comment(line).strip())]
    return blocks


def without_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` outside quotes, after white space)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


@attrs.define
class Terminal:
    """One bash that runs the lines it is given in order, in the directory and environment it was
    opened with."""

    script: trio.lowlevel.FdStream
    output: trio.abc.ReceiveStream
    notify: trio.socket.SocketType
    buffer: bytearray = attrs.field(factory=bytearray)
    serial: int = 0

    async def type(self, line: str, *, pasted: bool = False) -> tuple[int, str]:
        """Run ``line``: its exit status and what it printed (stdout and stderr). A line ending
        in ``&``: 0 and nothing, once the program it started has said it is ready (``pasted``:
        at once, as the lines of a block pasted whole follow one another)."""
        if line.endswith("&"):
            await self.script.send_all(f"{line}\n".encode())
            while not pasted and b"READY=1" not in (await self.notify.recv(4096)).split(b"\n"):
                pass
            return 0, ""
        self.serial += 1
        marker = f"__terminal_line_{self.serial}"
        await self.script.send_all(f'{line}\necho "{marker} $?"\n'.encode())
        return await self.until(marker)

    async def until(self, marker: str) -> tuple[int, str]:
        """What was printed up to the line ``<marker> <number>``, and that number."""
        pattern = re.compile(rf"{re.escape(marker)} (\d+)\n".encode())
        while not (found := pattern.search(self.buffer)):
            chunk = await self.output.receive_some()
            if not chunk:
                raise AssertionError(f"bash ended before {marker}: {self.buffer.decode(errors='replace')}")
            self.buffer += chunk
        status, printed = int(found.group(1)), self.buffer[: found.start()].decode(errors="replace")
        del self.buffer[: found.end()]
        return status, printed

    async def finish(self, line: str) -> int:
        """Run ``line`` (``wait %1``, say), then end the shell: the line's exit status."""
        status, _printed = await self.type(line)
        await self.script.send_all(b"exit\n")
        return status


def terminal_env(home: Path, path: list[Path], extra: Mapping[str, str] = {}) -> dict[str, str]:
    """A person's environment: ``home``, ``path`` first on PATH, none of hive's variables set."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("HIVE_", "XDG_", "FAKE_", "CLAUDE"))}
    search = ":".join(str(p) for p in path)
    return {**keep, "HOME": str(home), "PATH": f"{search}:{os.environ.get('PATH', '/usr/bin:/bin')}", **extra}


@asynccontextmanager
async def open_terminal(cwd: Path, env: Mapping[str, str]) -> AsyncIterator[Terminal]:
    """A bash in ``cwd`` with ``env`` (``NOTIFY_SOCKET`` set to a socket of the terminal's own);
    in a session of its own, whose processes get SIGINT when the block ends."""
    notify_path = cwd / ".notify"
    read_end, write_end = os.pipe()
    with trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        await notify.bind(str(notify_path))
        try:
            process = await trio.lowlevel.open_process(
                ["bash", "--norc", "--noprofile", f"/dev/fd/{read_end}"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(read_end,),
                env={**env, "NOTIFY_SOCKET": str(notify_path)},
                cwd=cwd,
            )
        finally:
            os.close(read_end)
        assert process.stdout is not None
        async with trio.lowlevel.FdStream(write_end) as script:
            try:
                yield Terminal(script, process.stdout, notify)
            finally:
                # Whatever the block left in the background (a test that failed midway) gets
                # SIGINT, as a person's Ctrl-C would send it.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGINT)
                with trio.move_on_after(10, shield=True):
                    await process.wait()
