"""Driving hive's ACP backend against fixtures/acp_agent.py (an agent on the official ACP SDK)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs

from fixtures import acp_agent
from hive.acp import AcpRuntime, open_acp_runtime
from hive.runtime import Backend, Config, RuntimeSpec
from tests.helpers.inotify import wait_until

# The configuration options a fake ACP agent offers, as claude-agent-acp offers its own.
MODEL = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "m1",
    "options": [{"value": "m1", "name": "Fast"}, {"value": "m2", "name": "Smart"}],
}
EFFORT = {
    "id": "effort",
    "name": "Effort",
    "category": "thought_level",
    "type": "select",
    "currentValue": "low",
    "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
}


@attrs.define
class FakeAcp:
    root: Path

    @property
    def script_path(self) -> Path:
        return self.root / "acp-script.json"

    @property
    def record_path(self) -> Path:
        return self.root / "acp-record.jsonl"

    @property
    def state(self) -> Path:
        return self.root / "acp-state"

    def script(self, *turns: Any, **options: Any) -> None:
        acp_agent.write_script(self.script_path, list(turns) or ["default"], **options)

    def spec(self) -> RuntimeSpec:
        env = (
            ("FAKE_ACP_SCRIPT", str(self.script_path)),
            ("FAKE_ACP_RECORD", str(self.record_path)),
            ("FAKE_ACP_STATE", str(self.state)),
            ("FAKE_ACP_MAX_SECONDS", "120"),
        )
        return RuntimeSpec(backend=Backend.ACP, command=sys.executable, args=(acp_agent.PATH,), env=env)

    def config(self, **changes: Any) -> Config:
        return Config(cwd=self.root, **changes)

    @asynccontextmanager
    async def runtime(self, session_id: str | None = None, **config: Any) -> AsyncIterator[AcpRuntime]:
        async with open_acp_runtime(self.spec(), self.config(**config), session_id) as runtime:
            yield runtime

    def record(self) -> list[dict[str, Any]]:
        return acp_agent.read_record(self.record_path)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.record() if e["event"] == kind]

    def inbound(self, method: str | None = None) -> list[dict[str, Any]]:
        """What hive sent the agent (every process), oldest first."""
        messages = [e["message"] for e in self.events("in")]
        return [m for m in messages if method is None or m.get("method") == method]

    def signals(self) -> list[str]:
        return [e["signal"] for e in self.events("signal")]

    def pids(self) -> list[int]:
        return [e["pid"] for e in self.events("start")]

    async def wait_for_event(self, kind: str) -> dict[str, Any]:
        """The agent's first ``kind`` event, once it is in the record (a file another process
        appends to: read again whenever its directory changes)."""
        found = await wait_until(lambda: self.events(kind), self.record_path.parent)
        return found[0]

    def cleanup(self) -> None:
        for pid in self.pids():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
