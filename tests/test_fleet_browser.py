"""``hive web`` in a real browser: headless Chromium (Debian's ``chromium``) loads the page of a
fleet of three ``hive-agent``s on the demo agent, sends one a prompt through its page's form, and
sees the turn come without a reload; a screenshot of each page is saved (``HIVE_WEB_SCREENSHOTS``
names a directory to keep them in: the README's come from here). Then pages, more than the six
connections a browser opens to a server, each load and go live: one after another in a tab, back
and forward through its history, and in tabs of their own."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from hive.demo import agent_environment
from tests.helpers.cdp import Page, chromium_path, open_page
from tests.helpers.harness import running_agent
from tests.test_fleet_web import TOKEN, web

GUARD = 120
NAMES = ("builder", "reviewer", "scribe")

pytestmark = pytest.mark.skipif(
    chromium_path() is None and not os.environ.get("CI"),
    reason="Chromium is not installed (Debian: apt-get install chromium); .ci/run installs it",
)

_SHOWS_THE_FLEET = """new Promise(resolve => {
  const check = () => {
    const rows = [...document.querySelectorAll("#fleet tr[data-agent]")];
    if (rows.length === 3 && document.getElementById("updated").textContent.includes("live")
        && rows.every(row => row.innerText.includes("running")))
      resolve(rows.map(row => row.innerText));
  };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, characterData: true});
  check();
})"""

_SHOWS_THE_LAST_TURN = """new Promise(resolve => {
  const check = () => {
    const row = document.querySelector('#fleet tr[data-agent="reviewer"]');
    if (row && row.innerText.includes("completed at")) resolve(row.innerText);
  };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, characterData: true});
  check();
})"""

_SENDS = """(() => {
  window.hiveMarker = "the same page";
  document.querySelector("textarea[name=text]").value = "please look at the failing build";
  document.getElementById("send").click();
  return location.href;
})()"""

_SHOWS_THE_TURN = """new Promise(resolve => {
  const log = document.getElementById("log");
  const check = () => {
    if (log.textContent.includes("please look at the failing build") && log.textContent.includes("ended:"))
      resolve({text: log.textContent, href: location.href, marker: window.hiveMarker});
  };
  new MutationObserver(check).observe(log, {subtree: true, childList: true, characterData: true});
  check();
})"""


async def _screenshot(page: Page, path: Path) -> None:
    shot = await page.send("Page.captureScreenshot", format="png")
    path.write_bytes(base64.b64decode(shot["data"]))
    kept = os.environ.get("HIVE_WEB_SCREENSHOTS")
    if kept:
        shutil.copy(path, Path(kept) / path.name)


async def _goes_live(page: Page, loading: Awaitable[object]) -> None:
    """Until what ``loading`` loads (or brings back from the back/forward cache) has its event
    stream answered: the page is live (``Network.enable`` sent to ``page``)."""
    async with page.expecting("Network.responseReceived") as answered:
        await loading
        while (await answered.receive())["type"] != "EventSource":
            pass


async def _traverse(page: Page, step: int) -> None:
    """Back (-1) or forward (1) in the page's history."""
    history = await page.send("Page.getNavigationHistory")
    entry = history["entries"][history["currentIndex"] + step]
    await page.send("Page.navigateToHistoryEntry", entryId=entry["id"])


async def _many_pages_load_and_go_live(page: Page, base: str) -> None:
    """Seven pages in turn in one tab, back and forward through them, then seven tabs: each page
    loads and goes live, though a browser opens only six connections to the server."""
    await page.send("Network.enable")
    for name in (*NAMES, *NAMES, NAMES[0]):
        await _goes_live(page, page.navigate(f"{base}/agent/{name}" if name != NAMES[1] else f"{base}/"))
    for step in (-1, -1, -1, 1, 1, -1, -1):
        await _goes_live(page, _traverse(page, step))
    for name in (*NAMES, *NAMES, NAMES[0]):
        tab = await page.open_tab()
        await tab.send("Network.enable")
        await _goes_live(tab, tab.navigate(f"{base}/agent/{name}"))


async def test_the_fleet_in_a_real_browser_sends_a_prompt_shows_its_turn_live_and_many_pages_load(
    short_tmp: Path,
) -> None:
    assert chromium_path() is not None, "Chromium is missing: .ci/run installs Debian's chromium"
    fleet = short_tmp / "fleet"
    with trio.fail_after(GUARD):
        async with AsyncExitStack() as agents:
            for name in NAMES:
                root = short_tmp / name
                root.mkdir()
                await agents.enter_async_context(
                    running_agent(
                        root, agent_environment(), "--state-dir", str(fleet / name), "--with-bash-daemon"
                    )
                )
            async with web(fleet) as base, open_page(short_tmp) as page:
                await page.navigate(f"{base}/?token={TOKEN}")
                rows = await page.evaluate(_SHOWS_THE_FLEET)
                await page.navigate(f"{base}/agent/reviewer")
                before = await page.evaluate(_SENDS)
                shown = await page.evaluate(_SHOWS_THE_TURN)
                await _screenshot(page, short_tmp / "web-agent.png")
                await page.navigate(f"{base}/")
                after = await page.evaluate(_SHOWS_THE_LAST_TURN)
                await _screenshot(page, short_tmp / "web-fleet.png")
                await _many_pages_load_and_go_live(page, base)
    assert [row.split()[0] for row in rows] == list(NAMES)
    assert all("idle" in row for row in rows), rows
    assert "completed at" in after and "tok" in after, after
    assert shown["href"] == before and shown["marker"] == "the same page", "the page was reloaded"
    assert (
        "── turn 1" in shown["text"]
        and "message from operator: please look at the failing build" in shown["text"]
    )
    for name in ("web-fleet.png", "web-agent.png"):
        assert (short_tmp / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
