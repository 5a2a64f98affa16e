"""``hive web``: the fleet in a browser, as an ASGI app (Starlette) that hypercorn serves on Trio.

- ``GET /``: the fleet's table (`hive ls`'s), each agent's context as a bar and its tokens and
  cost over its last 50 turns as a small chart, kept live by ``GET /events`` (server-sent events,
  sent when an agent's files change, woken by inotify, and every few seconds for the clocks).
- ``GET /agent/NAME``: one agent: its last turns rendered as ``hive agent log`` renders them, and
  the running turn as it is written (``GET /agent/NAME/events``), its running bash tasks with
  their output as it grows, its loose ends; forms to send a prompt, ask for a compaction and
  stop a task (``POST``), each checked for the token and the page's own Origin.
- **Access:** every request carries the token, once as ``?token=`` (the URL ``hive web`` prints;
  it becomes a cookie), then the cookie or ``Authorization: Bearer``; any other is answered 401
  and nothing else.

Nothing is cached between requests but the token: each answer is read from the state dirs
(their ends only), so it holds with agents stopped, restarted or half-written, and its memory
does not grow with their logs.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import attrs
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from hive._follow import FollowedFile
from hive._inotify import IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_MODIFY, IN_MOVED_TO, Inotify
from hive._unix import ForeignSocket
from hive.agent import LogRenderer
from hive.bash import TaskStore, read_tail
from hive.fleet import _page
from hive.fleet._history import TAIL_BYTES, Histories, TurnPoint, objects
from hive.fleet._survey import (
    ASK_SECONDS,
    TURN_LOG,
    AgentView,
    open_own_agent,
    open_own_bash,
    state_dirs,
    survey,
    survey_all,
)

COOKIE = "hive_web"
HEARTBEAT = 5.0
"""Seconds between two updates of a page whose agents' files did not change (its clocks move)."""
SETTLE = 0.1
"""How long a burst of file changes is let settle before the page is updated."""
_MASK = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE


@attrs.frozen
class Fleet:
    """What the app serves: the roots its agents are found under, and the token it wants."""

    roots: tuple[Path, ...]
    token: str
    histories: Histories = attrs.field(factory=Histories, eq=False)
    """Each agent's last turns, read once and then followed (see `Histories`)."""
    now: Callable[[], float] = attrs.field(default=time.time, eq=False)
    """The time (Unix time) the pages' clocks are read at."""
    ask_seconds: float = ASK_SECONDS
    """How long an agent's socket has to answer ``status`` before it is shown not answering."""

    def agents(self) -> dict[str, Path]:
        """Each agent's state dir, by name (the first of a name found)."""
        found: dict[str, Path] = {}
        for path in state_dirs(list(self.roots)):
            found.setdefault(path.name, path)
        return found


def make_app(fleet: Fleet) -> Starlette:
    """The ASGI app of ``fleet``."""

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def checked(request: Request) -> Response:
            given = request.query_params.get("token")
            if given is not None and _same(given, fleet.token):
                # The token leaves the URL (and the history) for a cookie of this origin alone.
                rest = {k: v for k, v in request.query_params.items() if k != "token"}
                target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(COOKIE, fleet.token, httponly=True, samesite="strict")
                return response
            if not _allowed(request, fleet.token):
                return PlainTextResponse("unauthorized", status_code=401)
            if request.method == "POST" and request.headers.get("origin") != _origin(request):
                return PlainTextResponse("forbidden: not from this page", status_code=403)
            return await handler(request)

        return checked

    async def index(request: Request) -> Response:
        views = await _fleet_state(fleet)
        return HTMLResponse(_page.fleet_page(views, fleet.now()))

    async def fleet_json(request: Request) -> Response:
        return JSONResponse(await _fleet_state(fleet))

    async def fleet_events(request: Request) -> Response:
        return EventStream(partial(_fleet_updates, fleet))

    async def agent_page(request: Request) -> Response:
        state_dir = fleet.agents().get(request.path_params["name"])
        if state_dir is None:
            return PlainTextResponse("no such agent", status_code=404)
        views = await survey_all([state_dir], fleet.ask_seconds)
        tasks = await trio.to_thread.run_sync(_running_tasks, state_dir)
        others = await trio.to_thread.run_sync(_others, state_dir)
        log = FollowedFile(state_dir / TURN_LOG, TAIL_BYTES)
        last = await trio.to_thread.run_sync(log.read, TAIL_BYTES)
        return HTMLResponse(_page.agent_page(views[0], _render(last.lines), tasks, others, fleet.now()))

    async def agent_events(request: Request) -> Response:
        state_dir = fleet.agents().get(request.path_params["name"])
        if state_dir is None:
            return PlainTextResponse("no such agent", status_code=404)
        return EventStream(partial(_agent_updates, fleet, state_dir))

    async def prompt(request: Request) -> Response:
        state_dir = fleet.agents().get(request.path_params["name"])
        form = await request.form()
        text = str(form.get("text") or "").strip()
        if state_dir is None:
            return PlainTextResponse("no such agent", status_code=404)
        if not text:
            return PlainTextResponse("the prompt is empty: write something to send", status_code=400)
        from hive.agent_socket import Prompt

        return await _tell(request, state_dir, Prompt(text=text))

    async def compact(request: Request) -> Response:
        state_dir = fleet.agents().get(request.path_params["name"])
        if state_dir is None:
            return PlainTextResponse("no such agent", status_code=404)
        from hive.agent_socket import Compact

        return await _tell(request, state_dir, Compact())

    async def stop_task(request: Request) -> Response:
        state_dir = fleet.agents().get(request.path_params["name"])
        if state_dir is None:
            return PlainTextResponse("no such agent", status_code=404)
        task_id = request.path_params["task"]
        try:
            with trio.fail_after(10):
                async with open_own_bash(state_dir) as client:
                    answer = await client.call("stop", {"id": task_id})
        except ForeignSocket as exc:
            return _not_own(exc)
        except (OSError, trio.TooSlowError) as exc:
            return PlainTextResponse(f"the bash daemon cannot be reached: {exc}", status_code=502)
        if answer.is_error:
            return PlainTextResponse(answer.text, status_code=400)
        return RedirectResponse(f"/agent/{state_dir.name}", status_code=303)

    routes = [
        Route("/", guarded(index)),
        Route("/fleet.json", guarded(fleet_json)),
        Route("/events", guarded(fleet_events)),
        Route("/agent/{name}", guarded(agent_page)),
        Route("/agent/{name}/events", guarded(agent_events)),
        Route("/agent/{name}/prompt", guarded(prompt), methods=["POST"]),
        Route("/agent/{name}/compact", guarded(compact), methods=["POST"]),
        Route("/agent/{name}/tasks/{task}/stop", guarded(stop_task), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _allowed(request: Request, token: str) -> bool:
    cookie = request.cookies.get(COOKIE)
    if cookie is not None and _same(cookie, token):
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and _same(given, token)


def _origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def _not_own(exc: ForeignSocket) -> Response:
    return PlainTextResponse(f"not the agent's own socket: {exc}; nothing was sent", status_code=502)


async def _tell(request: Request, state_dir: Path, message: Any) -> Response:
    from hive.agent_socket import AgentRequestError, WakeRefused

    try:
        with trio.fail_after(10):
            async with open_own_agent(state_dir) as (connection, _):
                reply = await connection.request(message)
    except ForeignSocket as exc:
        return _not_own(exc)
    except (OSError, AgentRequestError, WakeRefused, trio.TooSlowError) as exc:
        return PlainTextResponse(
            f"the agent cannot be reached (is hive-agent running?): {exc}", status_code=502
        )
    if not reply.ok:
        return PlainTextResponse(f"the agent refused: {reply.error}", status_code=400)
    return RedirectResponse(f"/agent/{state_dir.name}", status_code=303)


# -- what the pages show --------------------------------------------------------------------------


async def _fleet_state(fleet: Fleet) -> list[dict[str, Any]]:
    """Each agent's `AgentView`, with its last turns' tokens and costs (``history``)."""
    paths = list(fleet.agents().values())
    views = await survey_all(paths, fleet.ask_seconds)
    histories = await trio.to_thread.run_sync(lambda: [fleet.histories.points(p / TURN_LOG) for p in paths])
    return [_with_history(view, history) for view, history in zip(views, histories, strict=True)]


def _with_history(view: AgentView, history: list[TurnPoint]) -> dict[str, Any]:
    return {**attrs.asdict(view), "history": [attrs.asdict(p) for p in history]}


def _render(lines: list[bytes]) -> list[str]:
    """The log's lines as ``hive agent log`` shows them."""
    renderer = LogRenderer()
    rendered = [text for obj in objects(lines) for text in renderer.feed(obj)]
    return rendered + renderer.finish()


def _others(state_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Its loose ends (the ends it has not been told) and its subagents (blocking)."""
    from hive.subagent import Store as SubagentStore

    loose: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for end, _earlier in TaskStore(state_dir).load_loose_ends():
            loose.append(
                {"task": end.task_id, "cmd": end.cmd, "since": end.since, "told": end.wake is not None}
            )
    subagents: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for record in SubagentStore(state_dir).load_all():
            subagents.append(
                {
                    "name": record.name,
                    "backend": record.backend,
                    "turns": record.turns,
                    "running": record.current is not None,
                }
            )
    return {"loose_ends": sorted(loose, key=lambda e: e["since"]), "subagents": subagents}


def _running_tasks(state_dir: Path) -> list[dict[str, Any]]:
    """The bash tasks that have not ended, with the last 4 KiB of their output (blocking)."""
    store = TaskStore(state_dir)
    tasks = []
    with contextlib.suppress(OSError):
        for record in store.load_records():
            if record.state.final:
                continue
            out, err = read_tail(store.out_path(record.id)), read_tail(store.err_path(record.id))
            tasks.append(
                {
                    "id": record.id,
                    "state": record.state.value,
                    "cmd": record.cmd,
                    "started_at": record.started_at,
                    "stdout": out.text,
                    "stderr": err.text,
                }
            )
    return sorted(tasks, key=lambda t: t["id"])


# -- live updates -------------------------------------------------------------------------------


Emit = Callable[[str, Any], Awaitable[None]]
"""Send one server-sent event: its name and its data (sent as JSON)."""


class EventStream(Response):
    """A response of server-sent events, for as long as the client stays: ``produce`` is run
    with a function that sends one, and is cancelled once the client has gone (no generator
    is left behind, nor the inotify watches it holds)."""

    media_type = "text/event-stream"

    def __init__(self, produce: Callable[[Emit], Awaitable[None]]) -> None:
        self.status_code = 200
        self.background = None
        # No Content-Length: the body goes on until the client leaves.
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-store"),
        ]
        self._produce = produce

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})

        async def emit(event: str, data: Any) -> None:
            body = f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})

        async with trio.open_nursery() as nursery:

            async def gone() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(gone)
            await self._produce(emit)
            nursery.cancel_scope.cancel()


def _watching(paths: list[Path]) -> Inotify:
    watcher = Inotify()
    for path in paths:
        with contextlib.suppress(OSError):  # a directory not made yet: the heartbeat covers it
            watcher.watch(path, _MASK)
    return watcher


async def _next_change(watcher: Inotify) -> None:
    """Until a burst of changes has settled, or `HEARTBEAT` has passed."""
    with trio.move_on_after(HEARTBEAT):
        await watcher.changed()
        await trio.sleep(SETTLE)
        watcher.drain()


@attrs.define
class _Asking:
    """The fleet's agents, each asked on its own (`survey`, and its history read), its latest
    answer kept: an agent that does not answer holds up none of the others' updates."""

    fleet: Fleet
    nursery: trio.Nursery
    order: list[Path] = attrs.field(factory=list)
    """The agents, as the fleet lists them when they were last asked."""
    latest: dict[Path, dict[str, Any]] = attrs.field(factory=dict)
    answered: trio.Event = attrs.field(factory=trio.Event)
    """Set when an agent has answered since `next_answer` was last awaited."""
    _again: dict[Path, bool] = attrs.field(factory=dict)
    """The agents being asked, each with whether it is to be asked again once it has answered
    (its files changed meanwhile)."""

    def ask_all(self) -> None:
        self.order = list(self.fleet.agents().values())
        for path in self.order:
            if path in self._again:
                self._again[path] = True
            else:
                self._again[path] = False
                self.nursery.start_soon(self._ask, path)

    async def _ask(self, path: Path) -> None:
        while True:
            view = await survey(path, self.fleet.ask_seconds)
            history = await trio.to_thread.run_sync(self.fleet.histories.points, path / TURN_LOG)
            self.latest[path] = _with_history(view, history)
            self.answered.set()
            if not self._again[path]:
                del self._again[path]
                return
            self._again[path] = False

    async def next_answer(self) -> None:
        await self.answered.wait()
        self.answered = trio.Event()

    def state(self) -> list[dict[str, Any]]:
        return [self.latest[path] for path in self.order if path in self.latest]


async def _fleet_updates(fleet: Fleet, emit: Emit) -> None:
    """The fleet (``fleet``) once each agent has answered, then whenever one answers anew (its
    files changed, or a heartbeat passed) and what the page shows changed: its state, or the
    time a running turn has taken."""
    paths = list(fleet.agents().values())
    dirs = [d for p in paths for d in (p, p / "bash-tasks", p / "mcp-loose-ends", p / "subagents")]
    with _watching(dirs) as watcher:
        async with trio.open_nursery() as nursery:
            asking = _Asking(fleet, nursery)
            asking.ask_all()
            while any(path not in asking.latest for path in asking.order):
                await asking.next_answer()
            nursery.start_soon(_ask_on_change, asking, watcher)
            last = None
            while True:
                state, now = asking.state(), fleet.now()
                shown = (state, _page.fleet_rows(state, now))
                if shown != last:
                    last = shown
                    await emit("fleet", {"agents": state, "rows": shown[1], "now": now})
                await asking.next_answer()


async def _ask_on_change(asking: _Asking, watcher: Inotify) -> None:
    while True:
        await _next_change(watcher)
        asking.ask_all()


async def _agent_updates(fleet: Fleet, state_dir: Path, emit: Emit) -> None:
    """The log's end rendered (``reset``: it replaces what the page shows), then its lines
    rendered as they are appended (``log``), and the agent's view and running tasks whenever its
    files change (``agent``)."""
    followed = FollowedFile(state_dir / TURN_LOG, TAIL_BYTES)
    first = await trio.to_thread.run_sync(followed.read, TAIL_BYTES)
    renderer = LogRenderer()
    await emit("reset", [text for obj in objects(first.lines) for text in renderer.feed(obj)])
    tasks_dir = TaskStore(state_dir).tasks_dir
    with _watching([state_dir, tasks_dir]) as watcher:
        last = None
        while True:
            while True:  # all that was appended, a read (64 KiB) at a time
                appended = await trio.to_thread.run_sync(followed.read)
                if appended.restarted:  # the log was replaced: its lines are read again, afresh
                    renderer = LogRenderer()
                if not appended.read:
                    break
                added = [text for obj in objects(appended.lines) for text in renderer.feed(obj)]
                if added:
                    await emit("log", added)
            views = await survey_all([state_dir], fleet.ask_seconds)
            tasks = await trio.to_thread.run_sync(_running_tasks, state_dir)
            others = await trio.to_thread.run_sync(_others, state_dir)
            state = {"agent": attrs.asdict(views[0]), "tasks": tasks, **others}
            now = fleet.now()
            summary = _page.agent_summary(views[0], now)  # a running turn's time moves on
            if (state, summary) != last:
                last = (state, summary)
                await emit(
                    "agent",
                    {
                        **state,
                        "summary": summary,
                        "task_list": _page.task_list(state_dir.name, tasks),
                        "others": _page.others(others),
                        "now": now,
                    },
                )
            await _next_change(watcher)
