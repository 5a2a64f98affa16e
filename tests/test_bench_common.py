"""The benchmarks' own helpers: the flags a benchmark gives reach hive-bash-daemon; calls at agents' gaps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bench import _common
from bench._common import AGENT_GAPS_MS, ToolError, alternate, at_agents_gaps, running_daemon


def test_running_daemon_passes_its_extra_arguments_to_the_daemon(short_tmp: Path) -> None:
    with running_daemon(short_tmp, "--max-running", "3", "--no-cgroups") as daemon:
        argv = Path(f"/proc/{daemon.pid}/cmdline").read_bytes().split(b"\0")
    assert argv[-4:-1] == [b"--max-running", b"3", b"--no-cgroups"]


class _Server:
    """Answers every ``run`` at once, done or not, and notes who was called in what order."""

    def __init__(self, name: str, calls: list[str], state: str = "done") -> None:
        self.name, self.calls, self.state = name, calls, state

    def call(self, tool: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
        assert (tool, arguments) == ("run", {"cmd": "true", "wait_seconds": 30})
        self.calls.append(self.name)
        return 0.002, {"state": self.state, "exit_code": 0}


def test_alternate_takes_turns_pauses_the_gap_after_each_call_and_drops_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    pauses: list[float] = []
    monkeypatch.setattr(_common.time, "sleep", pauses.append)
    pid = os.getpid()
    servers = {"a": (_Server("a", calls), pid), "b": (_Server("b", calls), pid)}

    measured = alternate(servers, gap_ms=20, samples=3, warmup=2)

    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert pauses == [0.02] * 10
    assert measured.took_ms == {"a": [2.0] * 3, "b": [2.0] * 3}
    assert set(measured.cpu_ms_a_call) == {"a", "b"}


def test_alternate_refuses_a_task_that_did_not_end_inside_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common.time, "sleep", lambda _seconds: None)
    servers = {"a": (_Server("a", [], state="running"), os.getpid())}
    with pytest.raises(ToolError, match="expected a task done"):
        alternate(servers, gap_ms=0, samples=1, warmup=0)


def test_at_agents_gaps_gives_a_figure_a_gap_of_the_first_server_against_the_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_common.time, "sleep", lambda _seconds: None)
    calls: list[str] = []
    servers = {"hive": (_Server("hive", calls), os.getpid()), "sdk": (_Server("sdk", calls), os.getpid())}

    figures = at_agents_gaps(
        "27", servers, lambda gap, cpu: f"at {gap} ms, {sorted(cpu)}", "floor", target="<= 2x"
    )

    assert [f.what for f in figures] == [f"at {gap} ms, ['hive', 'sdk']" for gap in AGENT_GAPS_MS]
    assert {(f.value, f.floor, f.floor_what, f.passed) for f in figures} == {(2.0, 2.0, "floor", True)}
    assert len(calls) == 2 * 35 * len(AGENT_GAPS_MS)
