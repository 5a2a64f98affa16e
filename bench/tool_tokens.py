"""25. What the model reads of each bash tool's answer, in characters.

Claude Code shows the model an MCP tool's structured content in place of its text, as compact
JSON (``JSON.stringify``); the text only when there is no structured content. Every call of
every agent pays that in tokens. Measured through the relay, with an agent socket (as under
``hive-agent``, whose daemon wakes the agent), for four answers: a trivial ``run`` that ends
inside its wait, a ``run`` whose task is still going, a ``status`` of a task with 4 KiB of
stdout, and an error (``status`` of an unknown task). The state directory's path is counted as
the default one of a user named ``user`` (``/home/user/.local/state/hive``), so that the
figures do not depend on where the benchmark's scratch directory is. Targets (issue 41): the
trivial ``run`` at most 250 characters; each answer at most half of what it was before
(:data:`BEFORE`, measured at 45d00b1 with this script).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from _common import Figure, Relay, running_daemon, scratch, table
from wake_latency import Listener

STATE_DIR = "/home/user/.local/state/hive"
"""The state directory the figures are counted with: a default one, ``~/.local/state/hive``."""

ANSWERS = {
    "trivial run": ("run", {"cmd": "echo 'hi there'", "wait_seconds": 30}),
    "started run": ("run", {"cmd": "sleep 30", "wait_seconds": 0}),
    "status, 4 KiB": ("status", {"id": "out4k", "wait_seconds": 30}),
    "error": ("status", {"id": "no-such-task"}),
}
BEFORE = {"trivial run": 684, "started run": 597, "status, 4 KiB": 4757, "error": 152}
"""Each answer's characters at 45d00b1, before issue 41 (this script, the same calls)."""


def as_the_model_reads_it(answer: dict[str, Any], state: Path) -> str:
    """A ``tools/call`` answer as Claude Code gives it to the model, with ``state`` said as
    :data:`STATE_DIR`."""
    result = answer["result"]
    structured = result.get("structuredContent")
    if structured is not None:
        shown = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    else:
        shown = "\n".join(block["text"] for block in result["content"] if block["type"] == "text")
    return shown.replace(str(state), STATE_DIR)


def answers() -> dict[str, str]:
    """Each of :data:`ANSWERS` as the model reads it."""
    shown = {}
    with scratch() as root, Listener(root / "agent") as listener:
        threading.Thread(target=listener.serve_forever, daemon=True).start()
        try:
            with (
                running_daemon(root, agent_socket=root / "agent") as daemon,
                Relay(daemon.socket, root / "relay.err") as relay,
            ):
                relay.handshake()
                relay.call("run", cmd="head -c 4096 /dev/zero | tr '\\0' x", name="out4k", wait_seconds=0)
                for what, (tool, arguments) in ANSWERS.items():
                    request = relay.tool_request(tool, **arguments)
                    relay.send([request])
                    _, answer = relay.wait([request["id"]])[request["id"]]
                    shown[what] = as_the_model_reads_it(answer, root / "state")
        finally:
            listener.shutdown()
    return shown


def run() -> list[Figure]:
    figures = []
    for what, text in answers().items():
        before = BEFORE[what] or None
        target = "<= 250" if what == "trivial run" else "<= 0.5x"
        figures.append(
            Figure(
                "25 tool tokens",
                f"{what}: characters the model reads",
                len(text),
                "chars",
                before,
                "before issue 41",
                target if before else "",
                {"shown": text},
            )
        )
    return figures


if __name__ == "__main__":
    figures = run()
    print(table(figures))
    for figure in figures:
        print(f"\n{figure.what}:\n{figure.extra['shown']}")
