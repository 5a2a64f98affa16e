"""19. Following a task's output, and 20. being woken by a line that matters (issue 23).

One task echoes each line the benchmark writes into a FIFO it reads. For 19, a
``status(id, stdout_offset=<end>, wait_seconds=30)`` is sent through the relay and left
waiting (50 ms, so that it is), then a line is written; the figure is the time from the write
to the answer's arrival. The floor: the same line written to a file that this process waits on
with inotify, from the write to the wake-up and the read. For 20, the task was started with
``notify_on="^hit"``; a matching line is written and the figure is the time from the write to
the wake's arrival at a listener on the agent socket (the 200 ms merge window included).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import select
import threading
import time
from pathlib import Path

from _common import Figure, Relay, main, running_daemon, scratch, summary
from wake_latency import daemon_waking

SAMPLES = 30
WARMUP = 3
IN_MODIFY = 0x2


def echo_task(fifo: Path) -> str:
    return f"exec 3<{fifo}; while IFS= read -r l <&3; do printf '%s\\n' \"$l\"; done"


def inotify_floor(path: Path, samples: int) -> list[float]:
    """Write a line to a file and wake on inotify, read it: the machine's floor for 19."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    path.write_bytes(b"")
    libc.inotify_add_watch(fd, os.fsencode(path), IN_MODIFY)
    out: list[float] = []
    with open(path, "ab", buffering=0) as writer, open(path, "rb") as reader:
        for _ in range(samples):
            done = threading.Event()
            took: list[float] = []

            def wait(took: list[float] = took, done: threading.Event = done) -> None:
                select.select([fd], [], [])
                os.read(fd, 4096)
                reader.read()
                took.append(time.perf_counter())
                done.set()

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.05)
            started = time.perf_counter()
            writer.write(b"a line\n")
            done.wait()
            waiter.join()
            out.append((took[0] - started) * 1000)
    os.close(fd)
    return out


def run() -> list[Figure]:
    follow: list[float] = []
    wakes: list[float] = []
    with scratch() as root:
        fifo, hits = root / "lines", root / "hits"
        os.mkfifo(fifo)
        os.mkfifo(hits)
        with daemon_waking(root) as (listener, relay):
            relay.call("run", cmd=echo_task(fifo), name="follow", wait_seconds=0)
            relay.call(
                "run", cmd=echo_task(hits), name="watch", wait_seconds=0, notify_on="^hit", notify_max=1000
            )
            with open(fifo, "wb", buffering=0) as lines, open(hits, "wb", buffering=0) as matching:
                offset = 0
                for i in range(WARMUP + SAMPLES):
                    request = relay.tool_request("status", id="follow", stdout_offset=offset, wait_seconds=30)
                    relay.send([request])
                    time.sleep(0.05)
                    written = time.perf_counter()
                    lines.write(f"line {i}\n".encode())
                    ((arrived, answer),) = relay.wait([request["id"]]).values()
                    structured = answer["result"]["structuredContent"]
                    if structured["stdout_new"] != f"line {i}\n":
                        raise RuntimeError(f"followed the wrong bytes: {structured}")
                    offset = structured["stdout_next"]
                    written_at = time.time()
                    matching.write(f"hit {i}\n".encode())
                    woke = listener.wait_for("bash-task-watch")
                    if i >= WARMUP:
                        follow.append((arrived - written) * 1000)
                        wakes.append((woke - written_at) * 1000)
        floor = inotify_floor(root / "floor", SAMPLES)
    f, w, b = summary(follow), summary(wakes), summary(floor)
    return [*_follow_figures(f, w, b), _follow_big()]


def _follow_big() -> Figure:
    """21. ``seq 1 25000000`` (214 MB) followed from 0 by the next offsets to its end: every byte
    once (the text's hash against the file's), and the daemon's peak RSS before and after."""
    with scratch() as root, running_daemon(root) as daemon, Relay(daemon.socket, root / "relay.err") as relay:
        relay.handshake()
        relay.call("run", cmd="seq 1 25000000", name="big", wait_seconds=30)
        before = daemon.peak_rss_mb()
        digest, offset, calls = hashlib.sha256(), 0, 0
        started = time.perf_counter()
        while True:
            _, answer = relay.call("status", id="big", stdout_offset=offset)
            calls += 1
            digest.update(answer["stdout_new"].encode())
            if answer["stdout_next"] == offset:
                break
            offset = answer["stdout_next"]
        took = time.perf_counter() - started
        after = daemon.peak_rss_mb()
        # An agent's followed answer has the new output in place of the tail; a full one, the path.
        _, status = relay.call("status", id="big", full=True)
        path = Path(status["stdout"]["path"])
        whole = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest.hexdigest() != whole or offset != path.stat().st_size:
        raise RuntimeError("following the offsets did not read the file once, whole")
    return Figure(
        "21 follow 214 MB",
        f"seq 1 25000000 followed from 0 by the next offsets: {calls} status calls, every byte once; "
        f"daemon peak RSS {before:.1f} MB before, {after:.1f} MB after",
        took,
        "s",
        None,
        "",
        "",
        {"calls": calls, "rss_before_mb": before, "rss_after_mb": after},
    )


def _follow_figures(f: dict[str, float], w: dict[str, float], b: dict[str, float]) -> list[Figure]:
    return [
        Figure(
            "19 follow output",
            f"a line's write → a waiting status(stdout_offset, wait) answers with it, through the relay (median of {SAMPLES})",
            f["median"],
            "ms",
            b["median"],
            "inotify wake and read in-process",
            "< 5 ms",
            {"follow": f, "floor": b},
        ),
        Figure(
            "20 watch wake",
            f"a line matching notify_on written → its wake at the agent socket, 200 ms merge included (median of {SAMPLES})",
            w["median"],
            "ms",
            None,
            "",
            "< 250 ms",
            {"wakes": w},
        ),
    ]


if __name__ == "__main__":
    main(run)
