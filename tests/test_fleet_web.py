"""``hive web``: the app served by hypercorn on Trio in the test's own run, asked over real HTTP:
the token and the Origin, the fleet and an agent's page, their live updates (server-sent events),
and the forms (a prompt to a running harness, a task stopped through a real bash daemon)."""

from __future__ import annotations

import json
import math
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx2
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve

from hive._unix import open_unix_listener
from hive.agent import TurnRecord, encode
from hive.agent_socket import AgentRequest, AgentStatus, serve_agent_socket
from hive.cli._web import WebSettingError, read_token
from hive.fleet._web import HEARTBEAT, Fleet, _agent_updates, _fleet_updates, make_app
from tests.helpers.agent_loop import ScriptedRuntime, serving
from tests.helpers.daemon import DaemonHandle
from tests.helpers.gates import make_gate
from tests.helpers.processes import run_hive
from tests.helpers.results import call, structured
from tests.helpers.web import base_of, hive_web
from tests.test_fleet import _stopped_agent

GUARD = 30
TOKEN = "t" * 32


@asynccontextmanager
async def web(*roots: Path, **fleet: Any) -> AsyncIterator[str]:
    """The app over ``roots`` (its `Fleet`'s other fields in ``fleet``), listening on a free
    loopback port: its base URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(
            lambda task_status: serve(
                cast("Any", make_app(Fleet(roots, TOKEN, **fleet))),
                config,
                task_status=task_status,
                mode="asgi",
            )
        )
        yield str(bound[0])
        nursery.cancel_scope.cancel()


def _client(base: str, **options: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=base, timeout=GUARD, **options)


class EventStream:
    """A server-sent event stream read off a plain socket (HTTP/1.1, chunked), so that leaving
    it early leaves no client library's generator behind."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._body = b""
        self._raw = b""

    async def _more(self) -> None:
        data = await self._stream.receive_some()
        if not data:
            raise EOFError("the server closed the stream")
        self._raw += data
        # Chunked: `<size in hex>\r\n<data>\r\n`, as many as have come whole.
        while (end := self._raw.find(b"\r\n")) >= 0:
            size = int(self._raw[:end], 16)
            if len(self._raw) < end + 2 + size + 2:
                break
            self._body += self._raw[end + 2 : end + 2 + size]
            self._raw = self._raw[end + 2 + size + 2 :]

    async def next(self) -> tuple[str, Any]:
        """The next event and its data."""
        while b"\n\n" not in self._body:
            await self._more()
        block, self._body = self._body.split(b"\n\n", 1)
        fields = dict(line.split(": ", 1) for line in block.decode().splitlines())
        return fields["event"], json.loads(fields["data"])


@asynccontextmanager
async def events_of(base: str, path: str) -> AsyncIterator[EventStream]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nCookie: hive_web={TOKEN}\r\n\r\n"
        await stream.send_all(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive_some()
        head, rest = head.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
        events = EventStream(stream)
        events._raw = rest
        yield events


async def test_without_the_token_nothing_but_401(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "alpha")
    with trio.fail_after(GUARD):
        async with web(short_tmp) as base, _client(base) as client:
            for path in ("/", "/events", "/agent/alpha", "/fleet.json", "/?token=wrong"):
                answer = await client.get(path)
                assert (answer.status_code, answer.text) == (401, "unauthorized"), path
            posted = await client.post("/agent/alpha/compact", headers={"Origin": base})
            assert posted.status_code == 401
            bearer = await client.get("/fleet.json", headers={"Authorization": f"Bearer {TOKEN}"})
            assert bearer.status_code == 200 and bearer.json()[0]["name"] == "alpha"


async def test_the_token_in_the_url_becomes_a_cookie_and_the_fleet_shows(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "alpha")
    _stopped_agent(short_tmp / "beta")
    with trio.fail_after(GUARD):
        async with web(short_tmp) as base, _client(base) as client:
            first = await client.get(f"/?token={TOKEN}")
            assert first.status_code == 303 and first.headers["location"] == "/"
            assert "httponly" in first.headers["set-cookie"].lower()
            page = await client.get("/")
            fleet = (await client.get("/fleet.json")).json()
    assert page.status_code == 200
    assert '<a href="/agent/alpha">alpha</a>' in page.text and '<a href="/agent/beta">beta</a>' in page.text
    assert "25%" in page.text and "failed at " in page.text
    assert "<th>session</th>" in page.text and "<td>s-8</td>" in page.text, "hive ls's session column"
    assert "http://" not in page.text.replace(base, ""), "the page fetches nothing from elsewhere"
    assert [a["name"] for a in fleet] == ["alpha", "beta"]
    assert fleet[0]["history"] == [{"turn": 7, "ended": 1060.0, "tokens": 42, "cost": 0.125}]


async def test_the_fleet_page_is_updated_when_an_agents_files_change(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "alpha")
    log = short_tmp / "alpha" / "turns.jsonl"
    with trio.fail_after(GUARD):
        async with web(short_tmp) as base, events_of(base, "/events") as events:
            event, first = await events.next()
            assert event == "fleet" and first["agents"][0]["last_outcome"] == "failed"
            ended = TurnRecord(
                turn=8,
                kind="turn",
                started=1100.0,
                ended=1130.0,
                tokens={"input_tokens": 5},
                cost_usd=0.25,
                session_cost_usd=1.75,
            )
            with open(log, "ab") as file:  # the result says what the session has cost so far
                file.write(b'{"type":"result","subtype":"success","is_error":false,"total_cost_usd":1.75}\n')
                file.write(encode(ended))
            event, second = await events.next()
    (agent,) = second["agents"]
    assert (agent["last_outcome"], agent["turn"]) == ("completed", 8)
    assert agent["history"][-1] == {"turn": 8, "ended": 1130.0, "tokens": 5, "cost": 0.25}
    assert "completed at " in second["rows"]


async def test_a_running_turns_elapsed_time_advances_on_the_heartbeat(
    short_tmp: Path, mock_clock: trio.testing.MockClock
) -> None:
    """No file changes: the fleet's row and the agent's page show the turn's time go on, each
    heartbeat (the test's clock jumps to it; the pages' clock says how long the turn has run)."""
    mock_clock.rate = 1  # the guard runs on time; each heartbeat comes at once by a jump
    busy = short_tmp / "busy"
    busy.mkdir()
    wall = [1000.0]
    fleet = Fleet((short_tmp,), TOKEN, now=lambda: wall[0])

    async def in_a_turn(request: AgentRequest) -> AgentStatus:
        return AgentStatus(state="turn", turns=3, running_turn=3, running_since=1000.0, state_dir=str(busy))

    sent, received = trio.open_memory_channel[tuple[str, Any]](math.inf)

    async def emit(event: str, data: Any) -> None:
        sent.send_nowait((event, data))

    async def shown(wanted: str) -> str:
        while True:
            event, data = await received.receive()
            if event == wanted:
                return cast("str", data["rows"] if event == "fleet" else data["summary"])

    async def heartbeat() -> None:
        await trio.testing.wait_all_tasks_blocked()
        wall[0] += HEARTBEAT
        mock_clock.jump(HEARTBEAT)

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, busy / "agent.sock", in_a_turn)
            nursery.start_soon(_fleet_updates, fleet, emit)
            assert "turn 3 for 0.0 s" in await shown("fleet")
            await heartbeat()
            assert "turn 3 for 5.0 s" in await shown("fleet")
            nursery.cancel_scope.cancel()
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, busy / "agent.sock", in_a_turn)
            nursery.start_soon(_agent_updates, fleet, busy, emit)
            assert "turn 3 for 5.0 s" in await shown("agent")
            await heartbeat()
            assert "turn 3 for 10 s" in await shown("agent")
            nursery.cancel_scope.cancel()


async def test_an_agent_that_does_not_answer_delays_no_other_agents_update(short_tmp: Path) -> None:
    _stopped_agent(short_tmp / "quiet")
    mute = short_tmp / "mute"
    mute.mkdir()
    waiting: set[trio.SocketStream] = set()
    asked, questions = trio.open_memory_channel[trio.SocketStream](math.inf)

    async def never_answer(stream: trio.SocketStream) -> None:
        """The first question is hung up on; each later one is held open, unanswered."""
        asked.send_nowait(stream)
        async with stream:
            if not first_hung_up:
                first_hung_up.append(stream)
                return
            waiting.add(stream)
            while await stream.receive_some():
                pass
        waiting.discard(stream)

    first_hung_up: list[trio.SocketStream] = []
    with trio.fail_after(GUARD):
        async with open_unix_listener(mute / "agent.sock") as listener, trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, never_answer, [listener])
            # The mute agent holds each question after the first longer than the test waits.
            async with web(short_tmp, ask_seconds=GUARD * 2) as base, events_of(base, "/events") as events:
                _, first = await events.next()
                assert [(a["name"], a["harness"]) for a in first["agents"]] == [
                    ("mute", "stopped"),
                    ("quiet", "stopped"),
                ]
                await questions.receive()  # the first question
                ended = TurnRecord(turn=8, kind="turn", started=1100.0, ended=1130.0)
                with open(short_tmp / "quiet" / "turns.jsonl", "ab") as file:
                    file.write(encode(ended))
                await questions.receive()  # the mute agent is asked again
                while True:
                    _, data = await events.next()
                    if data["agents"][1]["last_outcome"] == "completed":
                        break
                assert waiting, "the update came while a question to the mute agent was open"
            nursery.cancel_scope.cancel()


async def test_a_prompt_from_the_page_reaches_the_running_harness_and_its_turn_streams(
    short_tmp: Path,
) -> None:
    runtime = ScriptedRuntime()
    state_dir = short_tmp / "gamma"
    state_dir.mkdir()
    with trio.fail_after(GUARD):
        async with serving(state_dir, runtime) as harness, trio.open_nursery() as nursery:
            from hive.agent_socket import serve_agent_socket

            await nursery.start(serve_agent_socket, state_dir / "agent.sock", harness.handle)
            async with (
                web(short_tmp) as base,
                _client(base, cookies={"hive_web": TOKEN}) as client,
                events_of(base, "/agent/gamma/events") as events,
            ):
                assert await events.next() == ("reset", [])
                foreign = await client.post(
                    "/agent/gamma/prompt", data={"text": "hi"}, headers={"Origin": "http://evil"}
                )
                assert foreign.status_code == 403
                sent = await client.post(
                    "/agent/gamma/prompt", data={"text": "look at the build"}, headers={"Origin": base}
                )
                assert sent.status_code == 303 and sent.headers["location"] == "/agent/gamma"
                assert "look at the build" in await runtime.next_prompt()
                runtime.end()
                shown: list[str] = []
                while not any(line.startswith("   ended:") for line in shown):
                    event, data = await events.next()
                    if event == "log":
                        shown += data
                page = await client.get("/agent/gamma")
            nursery.cancel_scope.cancel()
    assert any("look at the build" in line for line in shown), shown
    assert any(line.startswith("── turn 1") for line in shown), shown
    assert page.status_code == 200 and "── turn 1" in page.text


async def test_a_task_is_stopped_from_the_page_through_its_bash_daemon(daemon: DaemonHandle) -> None:
    gate = make_gate(daemon.root)
    daemon.socket = daemon.state_dir / "bash.sock"  # where an agent's is: its state dir
    with trio.fail_after(60):
        async with daemon.running(agent=False), daemon.session() as session:
            (daemon.state_dir / "queue").write_bytes(b"")  # an agent's state dir, its harness stopped
            started = structured(
                await call(session, "run", cmd=f"echo up; read x < {gate}", name="slow", wait_seconds=0)
            )
            assert started["state"] == "running"
            async with web(daemon.root) as base, _client(base, cookies={"hive_web": TOKEN}) as client:
                page = await client.get("/agent/state")
                assert 'data-task="slow"' in page.text
                stopped = await client.post("/agent/state/tasks/slow/stop", headers={"Origin": base})
                assert stopped.status_code == 303
            status = structured(await call(session, "status", id="slow"))
    assert status["state"] == "stopped"


def test_a_token_file_is_read_and_a_short_one_refused(short_tmp: Path) -> None:
    (short_tmp / "token").write_text(TOKEN + "\n")
    assert read_token(short_tmp / "token") == TOKEN
    (short_tmp / "short").write_text("abc")
    try:
        read_token(short_tmp / "short")
    except WebSettingError as exc:
        assert "shorter than 16 characters" in str(exc)
    else:
        raise AssertionError("a short token was taken")
    assert len(read_token(None)) >= 32 and read_token(None) != read_token(None)


async def test_hive_web_with_a_token_file_prints_its_url_without_the_token(short_tmp: Path) -> None:
    """Under a service its stdout is a journal: the token stays out of it."""
    _stopped_agent(short_tmp / "alpha")
    (short_tmp / "token").write_text(TOKEN)
    with trio.fail_after(GUARD):
        async with hive_web("--token-file", short_tmp / "token", short_tmp) as (line, _):
            base = base_of(line)
            async with httpx2.AsyncClient(
                timeout=GUARD, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as client:
                page = await client.get(f"{base}/")
    assert TOKEN not in line
    assert line == f"hive web: {base}/ (the token is in {short_tmp / 'token'})"
    assert page.status_code == 200 and "alpha" in page.text


async def test_hive_web_not_on_a_terminal_writes_its_new_token_to_a_private_file(short_tmp: Path) -> None:
    """The token it draws goes to a file (0600) in the runtime dir, named on stdout, removed at
    its stop; the URL printed carries no token."""
    _stopped_agent(short_tmp / "alpha")
    runtime = short_tmp / "run"
    with trio.fail_after(GUARD):
        async with hive_web(short_tmp, env={"XDG_RUNTIME_DIR": str(runtime)}) as (line, process):
            base = base_of(line)
            token_file = runtime / "hive" / f"web-{base.rsplit(':', 1)[1]}.token"
            token = token_file.read_text().strip()
            mode = token_file.stat().st_mode & 0o777
            async with httpx2.AsyncClient(timeout=GUARD, follow_redirects=True) as client:
                page = await client.get(f"{base}/?token={token}")
        assert process.returncode == 0
    assert line == f"hive web: {base}/ (the token is in {token_file})"
    assert token not in line and len(token) >= 32 and mode == 0o600
    assert page.status_code == 200 and "alpha" in page.text
    assert not token_file.exists()


async def test_hive_web_on_a_terminal_prints_its_new_token_in_its_url(short_tmp: Path) -> None:
    """A person at a terminal opens the URL as printed: a terminal is not a log."""
    _stopped_agent(short_tmp / "alpha")
    with trio.fail_after(GUARD):
        async with (
            hive_web(short_tmp, terminal=True) as (line, _),
            httpx2.AsyncClient(timeout=GUARD, follow_redirects=True) as client,
        ):
            page = await client.get(line.removeprefix("hive web: "))
    assert "/?token=" in line
    assert page.status_code == 200 and "alpha" in page.text


def test_hive_web_on_a_taken_port_names_the_address_and_listen(short_tmp: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = run_hive("web", "--listen", address, short_tmp, timeout=GUARD)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr == (
        f"hive: cannot listen on {address}: the address is already in use (another server listens "
        "there); give another HOST:PORT with --listen\n"
    )
