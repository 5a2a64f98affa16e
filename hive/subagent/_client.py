"""Reaching the subagent daemon: connect to its socket, or start it there on first use.

A daemon is started as ``python -m hive.subagent.daemon --detach`` in a session of its own
(it forks, so it is no child of the MCP server, which it outlives), its log in
``<state>/subagent-daemon.log``; it says ``ready`` on a pipe once it serves. Two servers starting one at once are fine: the second daemon finds
the socket taken and exits, and its starter connects to the first.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import attrs
import trio

from hive._files import ensure_private_dir, open_append
from hive._lines import LineCut, LineReader, LineTooLong
from hive._when import in_seconds
from hive.subagent._errors import DaemonUnavailable
from hive.subagent._wire import MAX_LINE, Answer, Call, Written, decode_answer, encode

RACE_RETRIES = 40
RACE_PAUSE = 0.05
START_WITHIN = 60.0
"""How long a starting daemon may take to say it is ready (imports on a busy machine included)."""


async def _connect(socket: Path) -> trio.SocketStream | None:
    try:
        return await trio.open_unix_socket(os.fspath(socket))
    except (FileNotFoundError, ConnectionRefusedError):
        return None


def _open_log(state_dir: Path) -> tuple[Path, IO[bytes]]:
    """The daemon's log, opened to append: created 0600 in a 0700 state dir, never through a symlink."""
    path = state_dir / "subagent-daemon.log"
    try:
        ensure_private_dir(state_dir)
        return path, os.fdopen(open_append(path), "ab")  # closed by the caller
    except OSError as exc:
        raise DaemonUnavailable(
            f"cannot start the subagent daemon: cannot open its log {path}: {exc}; move whatever is "
            "there away (hive keeps its own log there), or give hive-subagent-mcp another --state-dir"
        ) from None


async def start_daemon(state_dir: Path, socket: Path) -> None:
    """Start a daemon and wait for it to serve (or to exit: another one may have won)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "CLAUDECODE")}
    argv = [sys.executable, "-m", "hive.subagent.daemon", "--state-dir", str(state_dir)]
    argv += ["--socket", str(socket), "--ready-fd", "1", "--detach"]
    log_path, log_file = _open_log(state_dir)
    with log_file as log:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    assert process.stdout is not None
    said = b""
    with trio.move_on_after(START_WITHIN) as waited:
        async with process.stdout:
            while chunk := await process.stdout.receive_some(64):
                said += chunk
        # The process started forked the daemon and exited at once (so the daemon is nobody's
        # child here); the pipe ends once the daemon serves, or has given up.
        await process.wait()
    if waited.cancelled_caught:
        raise DaemonUnavailable(
            f"the subagent daemon started at {socket} did not get ready within {in_seconds(START_WITHIN)}; see {log_path}"
        )


async def connect(state_dir: Path, socket: Path, *, start: bool = True) -> trio.SocketStream:
    """A connection to the daemon, started first if none serves ``socket``."""
    stream = await _connect(socket)
    if stream is None and start:
        await start_daemon(state_dir, socket)
        stream = await _connect(socket)
        # A daemon started at the same moment by another server may hold the state directory
        # (ours then exits at once) and be a few milliseconds from listening: nothing announces
        # that to us, so it is tried again, briefly.
        for _ in range(RACE_RETRIES):
            if stream is not None:
                break
            await trio.sleep(RACE_PAUSE)
            stream = await _connect(socket)
    if stream is None:
        log_path = state_dir / "subagent-daemon.log"
        raise DaemonUnavailable(
            f"cannot reach the subagent daemon at {socket}"
            + (f", nor start one there (see {log_path})" if start else "")
        )
    return stream


@attrs.define(eq=False)
class Reply:
    """The daemon's answer to a call; one with ``confirm`` waits for :meth:`confirm` (its
    connection is held open till then)."""

    answer: Answer
    _stream: trio.SocketStream | None = None

    async def confirm(self, written: bool) -> None:
        """Tell the daemon whether the answer reached the MCP client, still connected (the ends
        it shows are told by it only then; else by wakes). Closes the connection."""
        stream, self._stream = self._stream, None
        if stream is None:
            return
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(encode(Written(written)))


async def request(state_dir: Path, socket: Path, call: Call, *, start: bool = True) -> Reply:
    """One tool call, answered by the daemon (started first if none serves and ``start``);
    :meth:`Reply.confirm` must follow if it asks."""
    stream = await connect(state_dir, socket, start=start)
    held = False
    try:
        try:
            await stream.send_all(encode(call))
            line = await LineReader(stream, MAX_LINE).readline()
        except trio.BrokenResourceError as exc:
            raise DaemonUnavailable(
                f"the connection to the subagent daemon at {socket} broke: {exc}"
            ) from None
        except LineTooLong:
            raise DaemonUnavailable("the subagent daemon's answer is too long") from None
        except LineCut:
            line = None
        if line is None:
            raise DaemonUnavailable(
                f"the subagent daemon at {socket} closed the connection before answering "
                f"(it may have been stopped; see {state_dir / 'subagent-daemon.log'})"
            )
        try:
            answer = decode_answer(line)
        except ValueError as exc:
            raise DaemonUnavailable(f"the subagent daemon's answer cannot be read: {exc}") from None
        held = answer.confirm
        return Reply(answer, stream if held else None)
    finally:
        if not held:
            await stream.aclose()


async def call(state_dir: Path, socket: Path, request_: Call) -> Answer:
    """One tool call, answered by the daemon (and confirmed: the caller has the answer itself)."""
    reply = await request(state_dir, socket, request_)
    await reply.confirm(True)
    return reply.answer
