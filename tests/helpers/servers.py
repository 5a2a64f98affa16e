"""Hive's servers on a Unix socket, each run in the test's own Trio run, with a way to ask it one
well-formed question: the bare listener they are all built on, the agent socket, the bash daemon
and the subagent daemon. The socket tests (tests/test_sockets.py) run over all of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path

import attrs
import trio

from hive._unix import open_unix_listener
from hive.agent_socket import AgentRequest, Wake, send_wake, serve_agent_socket
from hive.agent_socket import encode as encode_request
from hive.bash import TaskSettings
from hive.bash import daemon as bash_daemon
from hive.daemon.relay import CALLER_META
from hive.subagent import daemon as subagent_daemon
from tests.helpers.jsonrpc import answers_initialize, initialize, raw_exchange, request


@attrs.frozen
class Server:
    """One kind of server: ``serve(state, path)`` serves ``path`` for the block (its state, if it
    keeps any, under ``state``); ``answers(path)`` asks what is there one well-formed question
    and says whether the answer is right; ``known_as`` is the name its messages give the path."""

    name: str
    known_as: str
    serve: Callable[[Path, Path], AbstractAsyncContextManager[None]]
    answers: Callable[[Path], Awaitable[bool]]

    def __str__(self) -> str:
        return self.name


async def _echo(stream: trio.SocketStream) -> None:
    async with stream:
        while data := await stream.receive_some(4096):
            await stream.send_all(data)


@asynccontextmanager
async def _listener(_state: Path, path: Path) -> AsyncIterator[None]:
    async with open_unix_listener(path, known_as="--where") as listener, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, _echo, [listener])
        yield
        nursery.cancel_scope.cancel()


async def _echoes(path: Path) -> bool:
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        await stream.send_all(b"ping")
        return await stream.receive_some(4) == b"ping"


async def _take(request: AgentRequest) -> None:
    pass


@asynccontextmanager
async def _agent_socket(_state: Path, path: Path) -> AsyncIterator[None]:
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, path, _take)
        yield
        nursery.cancel_scope.cancel()


async def _takes_a_wake(path: Path) -> bool:
    await send_wake(path, Wake("bash-task-probe", "still here"))  # raises unless acknowledged
    return True


@asynccontextmanager
async def _bash_daemon(state: Path, path: Path) -> AsyncIterator[None]:
    config = bash_daemon.DaemonConfig(
        state_dir=state, socket=path, tasks=TaskSettings(workdir=state.parent), cgroups=False
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(bash_daemon.serve_daemon, config)
        yield
        nursery.cancel_scope.cancel()


async def _bash_initializes(path: Path) -> bool:
    return await trio.to_thread.run_sync(answers_initialize, os.fspath(path))


@asynccontextmanager
async def _subagent_daemon(state: Path, path: Path) -> AsyncIterator[None]:
    config = subagent_daemon.DaemonConfig(state_dir=state, socket=path)
    async with trio.open_nursery() as nursery:
        await nursery.start(subagent_daemon.serve_daemon, config)
        yield
        nursery.cancel_scope.cancel()


def subagent_status(path: str) -> bool:
    """Whether the subagent daemon at ``path`` answers a `status` call, made for a caller as
    hive-subagent-mcp says it, without an error (blocking)."""
    hello = initialize(1)
    hello["params"]["_meta"] = {CALLER_META: {"cwd": "/"}}
    lines = [hello, request(2, "tools/call", {"name": "status", "arguments": {}})]
    reply = raw_exchange(path, b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    answers = {answer["id"]: answer for answer in map(json.loads, reply.splitlines())}
    return answers[2]["result"]["isError"] is False


async def _subagent_answers(path: Path) -> bool:
    return await trio.to_thread.run_sync(subagent_status, os.fspath(path))


SERVERS = [
    Server("listener", "--where", _listener, _echoes),
    Server("agent-socket", "agent socket path", _agent_socket, _takes_a_wake),
    Server("bash-daemon", bash_daemon.SOCKET_FLAG, _bash_daemon, _bash_initializes),
    Server("subagent-daemon", subagent_daemon.SOCKET_FLAG, _subagent_daemon, _subagent_answers),
]


# -- as processes, or in a thread of their own, for tests outside Trio ------------------------------


@contextmanager
def subagent_daemon_process() -> Iterator[Path]:
    """A subagent daemon process, started synchronously (its ``ready`` line awaited); its socket.
    A line that happens to start a subagent finds no agent to run (nothing on its PATH)."""
    root = Path(tempfile.mkdtemp(prefix="hive-sfz-", dir="/tmp"))
    sock = root / "subagent.sock"
    (root / "empty").mkdir()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hive.subagent.daemon",
            "--state-dir",
            str(root),
            "--socket",
            str(sock),
            "--ready-fd",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PATH": str(root / "empty"), "HIVE_RUNTIME": "claude"},
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"
        yield sock
        assert process.poll() is None, "the daemon died"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def agent_socket_in_a_thread() -> Iterator[Path]:
    """The agent socket served (taking every request) by a Trio run in a thread of its own; its path."""
    root = Path(tempfile.mkdtemp(prefix="hive-afz-", dir="/tmp"))
    path = root / "agent.sock"
    ready = threading.Event()
    stopping: list[Callable[[], None]] = []

    async def serve() -> None:
        with trio.CancelScope() as scope:
            token = trio.lowlevel.current_trio_token()
            stopping.append(lambda: token.run_sync_soon(scope.cancel))
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_agent_socket, path, _take)
                ready.set()
                await trio.sleep_forever()

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the agent socket did not come up"
        yield path
    finally:
        if stopping:
            stopping[0]()
        thread.join(30)
        shutil.rmtree(root, ignore_errors=True)


def agent_takes_a_wake(path: str) -> bool:
    """Whether the agent socket at ``path`` acknowledges a well-formed wake (blocking)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(encode_request(Wake("bash-task-probe", "still here")))
        buffer = b""
        while b"\n" not in buffer:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            buffer += chunk
    return json.loads(buffer.split(b"\n", 1)[0])["ok"] is True
