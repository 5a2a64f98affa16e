"""5. From a task's end to its wake arriving at the agent socket.

Each task (``run(wait_seconds=0)``) sleeps 0.2 s so that it ends after ``run`` has answered,
then writes ``date +%s%N`` to a stamp file as its last act. A listener on the agent socket
notes ``time.time()`` as each wake's line arrives and answers ``{"ok":true}``. One task at a
time, so that no wake queues behind another. Floor: the same command spawned from here, its
exit waited for, then one wake line sent over a fresh connection to the same listener.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from _common import Figure, Relay, line, main, running_daemon, scratch, summary

SAMPLES = 50
WARMUP = 3


class Listener(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path) -> None:
        self.arrivals: dict[str, float] = {}
        self.arrived = threading.Condition()
        super().__init__(str(path), _Handler)

    def wait_for(self, sender: str, timeout: float = 30.0) -> float:
        with self.arrived:
            if not self.arrived.wait_for(lambda: sender in self.arrivals, timeout):
                raise TimeoutError(f"no wake from {sender} within {timeout} s")
            return self.arrivals.pop(sender)


class _Handler(socketserver.StreamRequestHandler):
    server: Listener

    def handle(self) -> None:
        for raw in self.rfile:
            arrived = time.time()
            sender = json.loads(raw)["from"]
            with self.server.arrived:
                self.server.arrivals[sender] = arrived
                self.server.arrived.notify_all()
            self.wfile.write(b'{"ok":true}\n')


def command(stamp: Path) -> str:
    return f"sleep 0.2; date +%s%N > {stamp}"


def ended_at(stamp: Path) -> float:
    return int(stamp.read_text()) / 1e9


def floor_sample(root: Path, listener: Listener, agent: Path, i: int) -> float:
    stamp = root / f"floor-{i}"
    subprocess.run(["sh", "-c", command(stamp)], check=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(agent))
        sock.sendall(line({"type": "wake", "from": f"floor-{i}", "body": "ended", "transient": True}))
        sock.recv(100)
    return listener.wait_for(f"floor-{i}") - ended_at(stamp)


def daemon_sample(root: Path, listener: Listener, relay: Relay, i: int) -> float:
    stamp = root / f"task-{i}"
    _, result = relay.call("run", cmd=command(stamp), wait_seconds=0, name=f"w{i}")
    if result["state"] not in ("pending", "running"):
        raise RuntimeError(f"the task ended inside run's answer, so no wake follows: {result}")
    return listener.wait_for(f"bash-task-w{i}") - ended_at(stamp)


@contextlib.contextmanager
def daemon_waking(root: Path) -> Iterator[tuple[Listener, Relay]]:
    """A listener on ``root/agent`` and a daemon that sends it its wakes, reached through a relay
    (handshake done), for the duration of the block."""
    agent = root / "agent"
    with Listener(agent) as listener:
        threading.Thread(target=listener.serve_forever, daemon=True).start()
        try:
            with (
                running_daemon(root, agent_socket=agent) as daemon,
                Relay(daemon.socket, root / "relay.err") as relay,
            ):
                relay.handshake()
                yield listener, relay
        finally:
            listener.shutdown()


def run() -> list[Figure]:
    wakes: list[float] = []
    floor: list[float] = []
    with scratch() as root, daemon_waking(root) as (listener, relay):
        for i in range(WARMUP + SAMPLES):
            sample = daemon_sample(root, listener, relay, i)
            base = floor_sample(root, listener, root / "agent", i)
            if i >= WARMUP:
                wakes.append(sample * 1000)
                floor.append(base * 1000)
    w, f = summary(wakes), summary(floor)
    return [
        Figure(
            "5 wake latency",
            f"task's last act → its wake at the agent socket (median of {SAMPLES}; p90 {w['p90']:.1f} ms)",
            w["median"],
            "ms",
            f["median"],
            "spawn, wait, send one wake line",
            "< 20 ms",
            {"wake": w, "floor": f},
        )
    ]


if __name__ == "__main__":
    main(run)
