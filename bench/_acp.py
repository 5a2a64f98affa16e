"""What the ACP benchmarks (7-9) share: a bare JSON-RPC driver for an agent, and a stamping sink.

``RawAgent`` is the floor's client: the standard library only, the agent a child leading its own
process group, one message a line, each line stamped with ``perf_counter()`` as it is read.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hive.sink import Batch, ContextUsage

Message = dict[str, Any]


class StampSink:
    """Keeps hive's batches; notes the first ``context_usage`` call and every write's time."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.usage_at: float | None = None
        self.first_write = self.last_write = 0.0

    async def write(self, batch: Batch) -> None:
        now = time.perf_counter()
        if not self.batches:
            self.first_write = now
        self.batches.append(batch)
        self.last_write = now

    async def context_usage(self, usage: ContextUsage) -> None:
        if self.usage_at is None:
            self.usage_at = time.perf_counter()

    def messages(self) -> list[Message]:
        return [m for b in self.batches for m in b.objects()]


def line(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class RawAgent:
    """An ACP agent as a child, driven by hand: requests out, lines in, stamped on arrival."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, stderr: Path) -> None:
        self._ids = itertools.count()
        with open(stderr, "ab") as err:
            self.spawned = time.perf_counter()
            self.process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout

    def send(self, message: Message) -> float:
        """Write one message; the perf_counter just before the write."""
        started = time.perf_counter()
        self.stdin.write(line(message))
        self.stdin.flush()
        return started

    def request(self, method: str, params: Any) -> int:
        request_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def notify(self, method: str, params: Any) -> float:
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(
        self, request_id: int, on_update: Callable[[float, Message], None] | None = None
    ) -> tuple[float, Any]:
        """Read until the answer to ``request_id``: its arrival time and result. Requests from the
        agent are answered on the way: a permission with its allow option, anything else -32601."""
        while raw := self.stdout.readline():
            arrived = time.perf_counter()
            message = json.loads(raw)
            method = message.get("method")
            if method is None and message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"the agent answered with an error: {message['error']}")
                return arrived, message.get("result")
            if method is not None and message.get("id") is not None:
                self.send(
                    {"jsonrpc": "2.0", "id": message["id"], **answer_request(method, message.get("params"))}
                )
            elif method == "session/update" and on_update is not None:
                on_update(arrived, message["params"])
        raise RuntimeError(f"the agent's output ended (exit status {self.process.poll()})")

    def close(self) -> None:
        """SIGINT to the group, as hive does; then wait for the whole group to be gone."""
        stop_group(self.process.pid, lambda: self.process.poll() is not None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self.stdin.close()
        self.stdout.close()
        wait_group_gone(self.process.pid)


def answer_request(method: str, params: Any) -> Message:
    if method == "session/request_permission":
        options = {o.get("kind"): o["optionId"] for o in params.get("options", [])}
        chosen = options.get("allow_once") or options.get("allow_always")
        if chosen is not None:
            return {"result": {"outcome": {"outcome": "selected", "optionId": chosen}}}
        return {"result": {"outcome": {"outcome": "cancelled"}}}
    return {"error": {"code": -32601, "message": f"method not found: {method}"}}


def stop_group(pgid: int, exited: Callable[[], bool]) -> None:
    if not exited():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGINT)


def wait_group_gone(pgid: int, timeout: float = 10.0) -> None:
    """Until no process of the group is left (a real agent's children outlive it briefly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
