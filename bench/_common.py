"""What the benchmarks share: a daemon process, a raw JSON-RPC client over the relay, /proc probes, stats.

Standard library only, so the client's own cost stays small and known: one thread reads the
relay's stdout and stamps each answer with ``time.perf_counter()`` the moment its line arrives.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

BIN = Path(sys.executable).parent
PYTHON = sys.executable
DAEMON = BIN / "hive-bash-daemon"
RELAY = BIN / "hive-bash-mcp"
SDK_FLOOR_SERVER = Path(__file__).resolve().parent / "sdk_floor_server.py"
PROTOCOL = "2025-06-18"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- figures and stats ----------------------------------------------------------------------------


def summary(samples: Iterable[float]) -> dict[str, float]:
    """Median, p10, p90, min and count of ``samples``."""
    values = sorted(samples)
    deciles = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else values * 9
    return {
        "median": statistics.median(values),
        "p10": deciles[0],
        "p90": deciles[-1],
        "min": values[0],
        "n": len(values),
    }


@dataclass
class Figure:
    """One line of the results table: a measured value next to its floor from the same run."""

    bench: str
    what: str
    value: float
    unit: str
    floor: float | None = None
    floor_what: str = ""
    target: str = ""
    """``<= 3x`` (a ratio to the floor) or ``< 20 ms`` (an absolute bound); empty for context only."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        return self.value / self.floor if self.floor else None

    @property
    def passed(self) -> bool | None:
        if not self.target:
            return None
        op, bound = self.target.split()[:2]
        measured = self.ratio if self.target.endswith("x") else self.value
        assert measured is not None
        limit = float(bound.rstrip("x"))
        return measured <= limit if op == "<=" else measured < limit

    def as_json(self) -> dict[str, Any]:
        skipped = {"value": None} if math.isnan(self.value) else {}  # JSON has no NaN
        return {**asdict(self), **skipped, "ratio": self.ratio, "passed": self.passed}


def _number(value: float, unit: str) -> str:
    if math.isnan(value):  # a benchmark that was skipped
        return "—"
    return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"


def table(figures: Iterable[Figure]) -> str:
    rows = [
        "| benchmark | measured | value | floor | ratio | target | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        floor = f"{_number(f.floor, f.unit)} ({f.floor_what})" if f.floor is not None else "—"
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "—"
        result = {True: "pass", False: "**FAIL**", None: "—"}[f.passed]
        rows.append(
            f"| {f.bench} | {f.what} | {_number(f.value, f.unit)} | {floor} | {ratio} | {f.target or '—'} | {result} |"
        )
    return "\n".join(rows)


def main(run: Any) -> None:
    """Entry point of a single benchmark script: run it and print its table."""
    print(table(run()))


# -- /proc probes ---------------------------------------------------------------------------------


def proc_status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status, e.g. VmHWM (peak RSS) or VmRSS."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


# -- temporary directories and the daemon ---------------------------------------------------------


_SCRATCH: list[Path] = []


def default_base() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "hive-bench"


def _remove_scratch() -> None:
    for path in _SCRATCH:
        shutil.rmtree(path, ignore_errors=True)


def file_system(path: Path) -> str:
    """The file system ``path`` is on, as the figures need it: its type, and for ext4 whether it
    has a journal (without one, ext4 makes each new inode skip every inode freed in its group in
    the last 30 s, so a run's own deletions slow its later file creations; see README.md)."""
    best, kind, device = "", "?", ""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            dev, mount_point, fs_type = line.split()[:3]
            mount_point = mount_point.replace("\\040", " ")
            if os.path.commonpath([str(path), mount_point]) == mount_point and len(mount_point) >= len(best):
                best, kind, device = mount_point, fs_type, dev
    if kind == "ext4":
        try:
            task = Path(f"/sys/fs/ext4/{os.path.basename(device)}/journal_task").read_text().strip()
        except OSError:
            return "ext4"
        return "ext4 without a journal" if task == "<none>" else "ext4 with a journal"
    return kind


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A temporary directory with a short path (Unix socket paths are limited to 107 bytes).

    It is made under $HIVE_BENCH_TMP (default: ~/.cache/hive-bench, on the disk a real state
    directory would be on, and away from /tmp, which test suites churn): the daemon's state
    directory, and with it every task's record and output files, lives there, so that disk's
    speed is part of the figures.
    All of them are removed when the process exits, not as each benchmark ends: ext4 makes file
    creation several times dearer for some seconds after many deletions (its inode allocator
    skips recently freed inodes), and one benchmark's clean-up would slow the next one down.
    """
    base = Path(os.environ.get("HIVE_BENCH_TMP") or default_base())
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="hb-", dir=base))
    if not _SCRATCH:
        atexit.register(_remove_scratch)
    _SCRATCH.append(path)
    yield path


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    root: Path
    socket: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def peak_rss_mb(self) -> float:
        return proc_status_kb(self.pid, "VmHWM") / 1024

    def rss_mb(self) -> float:
        return proc_status_kb(self.pid, "VmRSS") / 1024

    def cpu(self) -> float:
        return cpu_seconds(self.pid)


@contextlib.contextmanager
def running_daemon(
    root: Path, *extra: str, agent_socket: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[Daemon]:
    """Run ``hive-bash-daemon`` with its state under ``root`` and the flags ``extra`` (and ``env``
    over this process's environment); it is ready (READY=1) once this yields.

    On exit the daemon gets SIGINT, and any task it leaves running is killed with its group.
    """
    state, sock, notify_path = root / "state", root / "s", root / "notify"
    args = [str(DAEMON), "--state-dir", str(state), "--socket", str(sock), "--workdir", str(root)]
    if agent_socket is not None:
        args += ["--agent-socket", str(agent_socket)]
    args += extra
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify, open(root / "daemon.err", "ab") as err:
        notify.bind(str(notify_path))
        notify.settimeout(0.1)
        environ = {**os.environ, **(env or {}), "NOTIFY_SOCKET": str(notify_path)}
        process = subprocess.Popen(args, env=environ, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"hive-bash-daemon exited with {process.returncode}: {_tail(root)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"hive-bash-daemon not ready within 60 s: {_tail(root)}")
                with contextlib.suppress(TimeoutError):
                    if b"READY=1" in notify.recv(4096).split(b"\n"):
                        break
            yield Daemon(process, root, sock)
        finally:
            _stop(process)
            _kill_leftover_tasks(state)


def _tail(root: Path) -> str:
    return (root / "daemon.err").read_text(errors="replace")[-2000:]


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _kill_leftover_tasks(state: Path) -> None:
    """The daemon leaves running tasks for its next start; a benchmark has no next start."""
    for record in (state / "bash-tasks").glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(record.read_text())
            if data.get("state") in ("pending", "running") and data.get("pid"):
                os.killpg(data["pid"], signal.SIGKILL)


# -- a raw JSON-RPC client over the relay ---------------------------------------------------------


def initialize_request(request_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class ToolError(RuntimeError):
    pass


class StdioClient:
    """An MCP stdio server as a child, spoken to in newline-delimited JSON-RPC.

    A reader thread stamps every answer with ``perf_counter()`` as its line arrives.
    """

    def __init__(self, argv: list[str], stderr: Path) -> None:
        self._err = open(stderr, "ab")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
        )
        self._ids = itertools.count(1)
        self._answers: dict[int, tuple[float, dict[str, Any]]] = {}
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            arrived = time.perf_counter()
            message = json.loads(raw)
            if "id" in message:
                with self._arrived:
                    self._answers[message["id"]] = (arrived, message)
                    self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(10)
        self._err.close()

    def send(self, messages: Iterable[dict[str, Any]]) -> float:
        """Write ``messages`` in one write; returns the perf_counter just before it."""
        data = b"".join(line(m) for m in messages)
        assert self.process.stdin is not None
        started = time.perf_counter()
        self.process.stdin.write(data)
        self.process.stdin.flush()
        return started

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def tool_request(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def wait(self, ids: Iterable[int], timeout: float = 120.0) -> dict[int, tuple[float, dict[str, Any]]]:
        """Wait for the answers to ``ids``; each comes back with its arrival time."""
        wanted = set(ids)
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not wanted <= self._answers.keys():
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(f"the relay exited ({self.process.returncode}) with answers missing")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(wanted - self._answers.keys())} answers missing")
                self._arrived.wait(left)
            return {i: self._answers.pop(i) for i in wanted}

    def handshake(self) -> dict[str, Any]:
        init = initialize_request(0)
        self.send([init])
        (_, answer) = self.wait([0])[0]
        self.send([INITIALIZED])
        return answer

    def call(self, tool: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
        """One tool call; returns its round-trip time and the result's structuredContent."""
        request = self.tool_request(tool, **arguments)
        started = self.send([request])
        arrived, answer = self.wait([request["id"]])[request["id"]]
        return arrived - started, structured(answer)

    def call_all(self, requests: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
        """Write all ``requests`` at once; returns the wall time until the last answer, and the results."""
        started = self.send(requests)
        answers = self.wait([r["id"] for r in requests])
        last = max(arrived for arrived, _ in answers.values())
        return last - started, [structured(answers[r["id"]][1]) for r in requests]


class Relay(StdioClient):
    """``hive-bash-mcp --socket S`` as a child (see :class:`StdioClient`)."""

    def __init__(self, socket_path: Path, stderr: Path) -> None:
        super().__init__([str(RELAY), "--socket", str(socket_path)], stderr)


def sdk_floor(root: Path, *flags: str, name: str = "floor") -> StdioClient:
    """``sdk_floor_server.py`` (the `mcp` SDK's own server on Trio) as a child, its stderr in ``root``."""
    return StdioClient([PYTHON, str(SDK_FLOOR_SERVER), *flags], root / f"{name}.err")


def structured(answer: dict[str, Any]) -> dict[str, Any]:
    if "error" in answer:
        raise ToolError(f"JSON-RPC error: {answer['error']}")
    result = answer["result"]
    if result.get("isError"):
        raise ToolError(f"tool error: {result['content'][0]['text']}")
    return dict(result["structuredContent"])


def check_done(result: dict[str, Any]) -> None:
    if result.get("state") != "done" or result.get("exit_code") != 0:
        raise ToolError(f"expected a task done with exit code 0, got {result}")


# -- calls as agents make them: one at a time, a pause between ------------------------------------


AGENT_GAPS_MS = (0, 20, 100, 300)


@dataclass
class Alternated:
    took_ms: dict[str, list[float]]
    """Each server's round trips after the warm-up."""
    cpu_ms_a_call: dict[str, float]
    """Each server's process's CPU time over all its calls (warm-up too), per call."""


def alternate(
    servers: dict[str, tuple[StdioClient, int]], gap_ms: float, samples: int = 30, warmup: int = 5
) -> Alternated:
    """``run(cmd="true", wait_seconds=30)`` to each server (a client, and the pid whose CPU its
    calls cost) in turn, the first of a round going last in the next, a pause of ``gap_ms`` after
    every call; ``warmup + samples`` rounds."""
    took: dict[str, list[float]] = {name: [] for name in servers}
    cpu = {name: cpu_seconds(pid) for name, (_, pid) in servers.items()}
    order = list(servers)
    for i in range(warmup + samples):
        for name in order if i % 2 == 0 else reversed(order):
            seconds, result = servers[name][0].call("run", cmd="true", wait_seconds=30)
            check_done(result)
            if i >= warmup:
                took[name].append(seconds * 1000)
            time.sleep(gap_ms / 1000)
    rounds = warmup + samples
    return Alternated(
        took, {name: (cpu_seconds(pid) - cpu[name]) * 1000 / rounds for name, (_, pid) in servers.items()}
    )


def at_agents_gaps(
    bench: str,
    servers: dict[str, tuple[StdioClient, int]],
    describe: Callable[[int, dict[str, float]], str],
    floor_what: str,
    *,
    target: str = "",
    samples: int = 30,
) -> list[Figure]:
    """A figure for each of ``AGENT_GAPS_MS``: the first of two ``servers`` against the second,
    their calls taking turns (:func:`alternate`); ``describe(gap, cpu_ms_a_call)`` says what."""
    measured, floor = servers
    figures = []
    for gap in AGENT_GAPS_MS:
        calls = alternate(servers, gap, samples)
        value, under = summary(calls.took_ms[measured]), summary(calls.took_ms[floor])
        extra = {measured: value, floor: under, "cpu_ms_a_call": calls.cpu_ms_a_call}
        figures.append(
            Figure(
                bench,
                describe(gap, calls.cpu_ms_a_call),
                value["median"],
                "ms",
                under["median"],
                floor_what,
                target,
                extra,
            )
        )
    return figures
