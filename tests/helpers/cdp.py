"""A headless Chromium driven over the Chrome DevTools Protocol: its WebSocket spoken with wsproto
(hypercorn's own) on a Trio stream, so a browser test needs nothing beyond what hive installs."""

from __future__ import annotations

import itertools
import json
import math
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx2
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Ping, Request, TextMessage

from tests.helpers.inotify import wait_until

FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
    "--remote-debugging-port=0",
)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Browser:
    """The browser's protocol connection: commands answered by id, events handed to the waiters
    of their page (its session) and name."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self.stream, self.ws = stream, ws
        self.ids = itertools.count(1)
        self.answers: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.events: dict[tuple[str | None, str], list[trio.MemorySendChannel[dict[str, Any]]]] = {}
        self._text = ""

    async def read(self) -> None:
        """Hand each answer and event to its waiter, until the connection closes."""
        while True:
            data = await self.stream.receive_some()
            if not data:
                return
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, Ping):
                    await self.stream.send_all(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    return
                elif isinstance(event, Message) and isinstance(event, TextMessage):
                    self._text += event.data
                    if event.message_finished:
                        message, self._text = json.loads(self._text), ""
                        self._deliver(message)

    def _deliver(self, message: dict[str, Any]) -> None:
        if "id" in message:
            waiter = self.answers.pop(message["id"], None)
            if waiter is not None:
                waiter.send_nowait(message)
            return
        for waiter in self.events.get((message.get("sessionId"), message.get("method", "")), []):
            waiter.send_nowait(message.get("params", {}))


class Page:
    """One page target (the first, or a tab opened with `open_tab`): its commands, and its
    events waited for by name."""

    def __init__(self, browser: _Browser, session: str | None = None) -> None:
        self._browser, self._session = browser, session

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        browser = self._browser
        number = next(browser.ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        browser.answers[number] = send
        command: dict[str, Any] = {"id": number, "method": method, "params": params}
        if self._session is not None:
            command["sessionId"] = self._session
        await browser.stream.send_all(browser.ws.send(TextMessage(json.dumps(command))))
        answer = await receive.receive()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    @asynccontextmanager
    async def expecting(self, event: str) -> AsyncIterator[trio.MemoryReceiveChannel[dict[str, Any]]]:
        """Inside the block, the ``event``s that come (subscribe before what sets them off)."""
        send, receive = trio.open_memory_channel[dict[str, Any]](math.inf)
        waiters = self._browser.events.setdefault((self._session, event), [])
        waiters.append(send)
        try:
            yield receive
        finally:
            waiters.remove(send)

    async def navigate(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        async with self.expecting("Page.loadEventFired") as loaded:
            await self.send("Page.navigate", url=url)
            await loaded.receive()

    async def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def open_tab(self) -> Page:
        """A new tab (blank), driven over this page's connection."""
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        tab = Page(self._browser, attached["sessionId"])
        await tab.send("Page.enable")
        await tab.send("Runtime.enable")
        return tab


@asynccontextmanager
async def open_page(root: Path) -> AsyncIterator[Page]:
    """A headless Chromium with a profile under ``root``, and its first page, driven until the
    block ends (then the browser is closed over the protocol, and waited for)."""
    executable = chromium_path()
    assert executable is not None
    profile = root / "chromium-profile"
    profile.mkdir()
    with open(root / "chromium.err", "wb") as err:
        process = await trio.lowlevel.open_process(
            [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        active = await wait_until(lambda: _port(profile / "DevToolsActivePort"), profile)
        async with httpx2.AsyncClient(timeout=30) as client:
            targets = (await client.get(f"http://127.0.0.1:{active}/json/list")).json()
        url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        parts = urlparse(url)
        stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
        ws = WSConnection(ConnectionType.CLIENT)
        await stream.send_all(ws.send(Request(host=parts.netloc, target=parts.path)))
        while not any(isinstance(e, AcceptConnection) for e in _events_of(ws, await stream.receive_some())):
            pass
        browser = _Browser(stream, ws)
        page = Page(browser)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(browser.read)
            await page.send("Page.enable")
            await page.send("Runtime.enable")
            yield page
            with trio.move_on_after(5):
                await page.send("Browser.close")
            nursery.cancel_scope.cancel()
        await stream.aclose()
        with trio.move_on_after(10):
            await process.wait()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)  # the browser, not an agent: a test's own tool
            await process.wait()


def _events_of(ws: WSConnection, data: bytes) -> list[Any]:
    ws.receive_data(data)
    return list(ws.events())


def _port(path: Path) -> int | None:
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return int(first) if first.isdigit() else None
