"""22. ``hive web`` over a fleet of 100 agents (issue 25): the page's first answer, and one live
update's latency.

100 state directories, each with a turn log of 60 ended turns (the chart reads the last 50), a
queue, a session and a bash task record, no harness running (each socket is looked for and not
found, as for a stopped fleet). ``hive web`` runs as a process. The first answer: ``GET /`` with
the token, from the request to the last byte, median of 20 after 3 warm-ups; its floor, in the
same run, the same request to a bare Starlette app on hypercorn answering a fixed page of the same
size (what serving a page costs before the fleet is read). The live update: ``GET /events`` open,
one turn appended to one agent's log, the time until the event that shows it arrives (the 100 ms
the server lets a burst of writes settle included), median of 10.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from _common import Figure, main, scratch, summary

AGENTS = 100
TURNS = 60
SAMPLES = 20
UPDATES = 10
TOKEN = "b" * 32


def make_fleet(root: Path) -> None:
    from hive.agent._harness_files import SessionFile, TurnRecord, encode

    for n in range(AGENTS):
        state = root / f"agent-{n:03d}"
        (state / "bash-tasks").mkdir(parents=True)
        lines = []
        for turn in range(1, TURNS + 1):
            lines.append(b'{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.01}\n')
            lines.append(
                encode(
                    TurnRecord(
                        turn=turn,
                        kind="turn",
                        started=1000.0 + turn,
                        ended=1001.0 + turn,
                        tokens={"input_tokens": 100 * turn, "output_tokens": 10},
                        context_used=1000 * turn,
                        context_size=200_000,
                    )
                )
            )
        (state / "turns.jsonl").write_bytes(b"".join(lines))
        (state / "queue").write_bytes(b"")
        (state / "session").write_bytes(encode(SessionFile("claude", f"s-{n}")))
        (state / "bash-tasks" / "t.json").write_text(json.dumps({"state": "running"}))


def start(argv: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    return process, line.split("//", 1)[1].split("/", 1)[0]


FLOOR = textwrap.dedent(
    """
    import sys, trio
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route
    page = "x" * int(sys.argv[1])
    async def index(request):
        return HTMLResponse(page)
    config = Config(); config.bind = ["127.0.0.1:0"]; config.accesslog = config.errorlog = None
    async def main():
        async with trio.open_nursery() as n:
            bound = await n.start(lambda task_status: serve(Starlette(routes=[Route("/", index)]), config, task_status=task_status, mode="asgi"))
            print(f"floor: {bound[0]}/", flush=True)
    trio.run(main)
    """
)


def get(host: str, path: str = "/") -> tuple[float, bytes]:
    connection = http.client.HTTPConnection(host, timeout=60)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    body = connection.getresponse().read()
    took = time.perf_counter() - started
    connection.close()
    return took, body


def update_latency(host: str, log: Path) -> list[float]:
    """Append a turn to ``log`` and time the event that shows it, `UPDATES` times."""
    from hive.agent._harness_files import TurnRecord, encode

    connection = http.client.HTTPConnection(host, timeout=60)
    connection.request("GET", "/events", headers={"Authorization": f"Bearer {TOKEN}"})
    response = connection.getresponse()
    arrived: list[tuple[float, bytes]] = []
    ready = threading.Event()
    changed = threading.Condition()

    def read() -> None:
        try:
            for raw in response:
                if raw.startswith(b"data: "):
                    with changed:
                        arrived.append((time.perf_counter(), raw))
                        changed.notify_all()
                    ready.set()
        except (OSError, http.client.HTTPException):
            return  # the connection closed: the measuring is over

    threading.Thread(target=read, daemon=True).start()
    ready.wait(60)
    times = []
    for turn in range(TURNS + 1, TURNS + 1 + UPDATES):
        with changed:
            seen = len(arrived)
        written = time.perf_counter()
        with open(log, "ab") as file:
            file.write(encode(TurnRecord(turn=turn, kind="turn", started=5000.0 + turn, ended=5001.0 + turn)))
        with changed:
            mark = f'"turn":{turn}'.encode()
            changed.wait_for(lambda seen=seen, mark=mark: len(arrived) > seen and mark in arrived[-1][1], 60)
            times.append(arrived[-1][0] - written)
    connection.close()
    return times


def run() -> list[Figure]:
    with scratch() as root:
        fleet = root / "fleet"
        make_fleet(fleet)
        (root / "token").write_text(TOKEN)
        hive = [
            sys.executable,
            "-m",
            "hive.cli",
            "web",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            str(root / "token"),
        ]
        web, host = start([*hive, str(fleet)])
        try:
            _, page = get(host)
            floor, floor_host = start([sys.executable, "-c", FLOOR, str(len(page))])
            try:
                answers, floors = [], []
                for i in range(3 + SAMPLES):
                    took, _ = get(host)
                    floor_took, _ = get(floor_host)
                    if i >= 3:
                        answers.append(took)
                        floors.append(floor_took)
            finally:
                floor.terminate()
                floor.wait()
            updates = update_latency(host, fleet / "agent-057" / "turns.jsonl")
        finally:
            web.terminate()
            web.wait()
    first, bare, live = summary(answers), summary(floors), summary(updates)
    return [
        Figure(
            "22 hive web",
            f"100 agents: GET / → the whole page ({len(page) // 1024} KiB), median of {SAMPLES} (p90 {first['p90'] * 1000:.0f} ms)",
            first["median"] * 1000,
            "ms",
            bare["median"] * 1000,
            "a bare Starlette page of the same size on hypercorn",
            "< 500 ms",
        ),
        Figure(
            "22 hive web",
            f"100 agents: a turn appended → the event that shows it, median of {UPDATES} (p90 {live['p90'] * 1000:.0f} ms; 100 ms of it the settling)",
            live["median"] * 1000,
            "ms",
            target="< 500 ms",
        ),
    ]


if __name__ == "__main__":
    main(run)
