"""``hive bash ...``: the operator CLI, run as a real subprocess against a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import trio

from tests.conftest import DaemonHandle

CLI_WITHIN = 60  # seconds for a whole test's CLI runs; each is a fresh interpreter importing trio and mcp


async def hive(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``hive ARGS`` to completion."""
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *args], capture_stdout=True, capture_stderr=True, check=False
    )


async def hive_all(*argvs: list[str]) -> list[subprocess.CompletedProcess[bytes]]:
    """Run several independent ``hive`` commands at once; their results in order."""
    results: list[subprocess.CompletedProcess[bytes] | None] = [None] * len(argvs)

    async def one(i: int) -> None:
        results[i] = await hive(*argvs[i])

    async with trio.open_nursery() as nursery:
        for i in range(len(argvs)):
            nursery.start_soon(one, i)
    return [r for r in results if r is not None]


def ok_json(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def ok_text(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"", done.stderr.decode()
    return done.stdout.decode()


async def test_run_prints_the_status_as_json_or_as_text(daemon: DaemonHandle) -> None:
    sock = str(daemon.socket)
    async with daemon.running(agent=False):
        with trio.fail_after(CLI_WITHIN):
            as_json, as_text = await hive_all(
                ["bash", "run", "echo hi", "--json", "--socket", sock],
                ["bash", "run", "echo hi; echo oops >&2; exit 2", "--socket", sock],
            )
    status = ok_json(as_json)
    assert status["state"] == "done"
    assert status["exit_code"] == 0
    assert status["stdout"]["tail"] == "hi\n"
    assert status["stderr"]["tail"] == ""
    assert status["cmd"] == "echo hi"
    assert await trio.Path(status["stdout"]["path"]).read_text() == "hi\n"

    # A command that fails is still a successful `run`: the CLI reports it, it does not fail itself.
    text = ok_text(as_text)
    lines = text.splitlines()
    assert lines[0].startswith("task ")
    assert "done, exit code 2" in lines[0]
    assert lines[1] == "$ echo hi; echo oops >&2; exit 2"
    assert "hi" in lines
    assert "oops" in lines
    assert not text.lstrip().startswith("{")


async def test_name_timeout_and_wait_zero(daemon: DaemonHandle) -> None:
    sock = str(daemon.socket)
    async with daemon.running(agent=False):
        with trio.fail_after(CLI_WITHIN):
            started, named = await hive_all(
                [
                    "bash",
                    "run",
                    "sleep 30",
                    "--name",
                    "sleeper",
                    "--timeout",
                    "0.5",
                    "--wait",
                    "0",
                    "--socket",
                    sock,
                ],
                ["bash", "run", "echo named", "--name", "greeting", "--json", "--socket", sock],
            )
            text = ok_text(started)
            assert text.startswith("task started: id=sleeper\n")
            ended = ok_json(
                await hive("bash", "status", "sleeper", "--wait", "10", "--json", "--socket", sock)
            )
    assert ended["id"] == "sleeper"
    assert ended["state"] == "timed_out"
    assert ended["timeout_secs"] == 0.5
    assert ended["signals"][0] == "SIGINT"
    greeting = ok_json(named)
    assert greeting["id"] == "greeting"
    assert greeting["stdout"]["tail"] == "named\n"


async def test_status_stop_and_ls(daemon: DaemonHandle) -> None:
    sock = str(daemon.socket)
    async with daemon.running(agent=False):
        with trio.fail_after(CLI_WITHIN):
            first = ok_json(
                await hive("bash", "run", "echo one", "--name", "one", "--json", "--socket", sock)
            )
            assert first["state"] == "done"
            later = ok_json(
                await hive(
                    "bash",
                    "run",
                    "sleep 0.3; echo later",
                    "--name",
                    "later",
                    "--wait",
                    "0",
                    "--json",
                    "--socket",
                    sock,
                )
            )
            assert later["id"] == "later"
            assert later["state"] in ("pending", "running")
            long = ok_json(
                await hive(
                    "bash", "run", "sleep 60", "--name", "long", "--wait", "0", "--json", "--socket", sock
                )
            )
            assert long["id"] == "long"

            waited, stopped = await hive_all(
                ["bash", "status", "later", "--wait", "10", "--json", "--socket", sock],
                ["bash", "stop", "long", "--json", "--socket", sock],
            )
            waited_status = ok_json(waited)
            assert waited_status["state"] == "done"
            assert waited_status["stdout"]["tail"] == "later\n"
            stopped_status = ok_json(stopped)
            assert stopped_status["state"] == "stopped"
            assert stopped_status["signals"][0] == "SIGINT"

            listed, table = await hive_all(
                ["bash", "ls", "--json", "--socket", sock], ["bash", "ls", "--socket", sock]
            )
    tasks = ok_json(listed)["tasks"]
    assert [t["id"] for t in tasks] == ["long", "later", "one"]  # every task, newest first
    assert [t["state"] for t in tasks] == ["stopped", "done", "done"]
    assert [t["cmd"] for t in tasks] == ["sleep 60", "sleep 0.3; echo later", "echo one"]
    created = [t["created_at"] for t in tasks]
    assert created == sorted(created, reverse=True)

    rows = ok_text(table).splitlines()
    assert rows[0].split("\t") == ["id", "state", "exit", "duration", "command"]
    assert [row.split("\t")[0] for row in rows[1:]] == ["long", "later", "one"]
    assert rows[1].split("\t")[1] == "stopped"
    assert rows[3].split("\t")[1:3] == ["done", "0"]
    assert rows[3].split("\t")[4] == "echo one"


async def test_errors_exit_1_with_a_message_on_stderr(daemon: DaemonHandle) -> None:
    sock = str(daemon.socket)
    absent = daemon.root / "absent.sock"
    async with daemon.running(agent=False):
        with trio.fail_after(CLI_WITHIN):
            unknown, unknown_json, no_daemon, negative = await hive_all(
                ["bash", "status", "no-such-task", "--socket", sock],
                ["bash", "stop", "no-such-task", "--json", "--socket", sock],
                ["bash", "ls", "--socket", str(absent)],
                ["bash", "run", "true", "--wait", "-1", "--socket", sock],
            )
    assert unknown.returncode == 1
    assert unknown.stdout == b""
    err = unknown.stderr.decode()
    assert err.startswith("hive: ")
    assert "no task has id 'no-such-task'" in err

    # With --json the structured error goes to stdout, and the message still to stderr.
    assert unknown_json.returncode == 1
    assert json.loads(unknown_json.stdout)["error"] == "UnknownTask"
    assert "no-such-task" in unknown_json.stderr.decode()

    assert no_daemon.returncode == 1
    assert no_daemon.stdout == b""
    err = no_daemon.stderr.decode()
    assert err.startswith("hive: ")
    assert str(absent) in err
    assert "Traceback" not in err

    assert negative.returncode == 1
    assert negative.stdout == b""
    assert "wait_seconds must not be negative" in negative.stderr.decode()


async def test_help() -> None:
    with trio.fail_after(CLI_WITHIN):
        top, bash, run = await hive_all(["--help"], ["bash", "--help"], ["bash", "run", "--help"])
    assert ok_text(top).startswith("usage: hive")
    assert "demo" in top.stdout.decode() and "bash" in top.stdout.decode()
    bash_help = ok_text(bash)
    for command in ("run", "status", "stop", "ls"):
        assert command in bash_help
    run_help = ok_text(run)
    for option in ("--name", "--timeout", "--wait", "--json", "--socket", "CMD"):
        assert option in run_help
