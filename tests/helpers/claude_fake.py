"""Driving hive's claude backend against fixtures/fake_claude.py."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs

from fixtures import fake_claude
from hive.claude import InfiniteSession, open_claude_runtime
from hive.runtime import Config, RuntimeSpec


@attrs.define
class FakeClaude:
    """A fake claude in a scratch directory: its script, its record, an executable to run it."""

    root: Path

    @property
    def executable(self) -> Path:
        return self.root / "claude"

    @property
    def record_path(self) -> Path:
        return self.root / "record.jsonl"

    @property
    def script_path(self) -> Path:
        return self.root / "script.json"

    def install(self) -> FakeClaude:
        self.executable.write_text(f'#!/bin/sh\nexec {sys.executable} {fake_claude.PATH} "$@"\n')
        self.executable.chmod(0o755)
        return self

    def script(self, *turns: Any, **options: Any) -> None:
        fake_claude.write_script(self.script_path, list(turns), **options)

    def env(self) -> tuple[tuple[str, str], ...]:
        return (
            ("FAKE_CLAUDE_SCRIPT", str(self.script_path)),
            ("FAKE_CLAUDE_RECORD", str(self.record_path)),
            ("FAKE_CLAUDE_MAX_SECONDS", "120"),
        )

    def config(self, **changes: Any) -> Config:
        env = (*self.env(), *changes.pop("env", ()))
        return Config(cwd=self.root, env=env, **changes)

    def record(self) -> list[dict[str, Any]]:
        return fake_claude.read_record(self.record_path)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.record() if e["event"] == kind]

    def starts(self) -> list[dict[str, Any]]:
        return self.events("start")

    def signals(self) -> list[str]:
        return [e["signal"] for e in self.events("signal")]

    @asynccontextmanager
    async def runtime(self, session_id: str | None = None, **config: Any) -> AsyncIterator[InfiniteSession]:
        spec = RuntimeSpec(claude_command=str(self.executable))
        async with open_claude_runtime(spec, self.config(**config), session_id) as runtime:
            yield runtime

    def cleanup(self) -> None:
        """Stop any fake a test left running on purpose (an ignorer of SIGINT, say)."""
        for start in self.starts():
            pid = start["pid"]
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue


def result_lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines() if json.loads(line).get("type") == "result"]
