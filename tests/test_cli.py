"""``hive bash ...``: the operator CLI, run as a real subprocess against a real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hive._unix import open_unix_listener
from tests.helpers.daemon import DaemonHandle
from tests.helpers.fake_bash_daemon import BAD_ANSWERS, bad_daemon
from tests.helpers.gates import gated, make_gate, open_gate, sigkill
from tests.helpers.processes import wait_exited

CLI_WITHIN = 60  # seconds for a whole test's CLI runs, each a fresh interpreter


async def hive(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``hive ARGS`` to completion, ``stdin`` on its stdin."""
    return await trio.run_process(
        [sys.executable, "-m", "hive.cli", *args],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
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


async def test_run_prints_the_status_as_json_or_as_text(served: DaemonHandle) -> None:
    sock = str(served.socket)
    with trio.fail_after(CLI_WITHIN):
        as_json, as_text = await hive_all(
            ["bash", "run", "echo hi", "--wait", "30", "--json", "--socket", sock],
            ["bash", "run", "echo hi; echo oops >&2; exit 2", "--wait", "30", "--socket", sock],
        )
    status = ok_json(as_json)
    assert status["state"] == "done"
    assert status["exit_code"] == 0
    assert status["stdout"]["tail"] == "hi\n"
    assert status["stderr"]["tail"] == ""
    assert status["cmd"] == "echo hi"
    assert await trio.Path(status["stdout"]["path"]).read_text() == "hi\n"

    # A task that fails is reported, and the CLI exits with its status, with nothing on stderr.
    assert as_text.returncode == 2, as_text.stderr.decode()
    assert as_text.stderr == b""
    text = as_text.stdout.decode()
    lines = text.splitlines()
    assert lines[0].startswith("task ")
    assert "done, exit code 2" in lines[0]
    assert lines[1] == "$ echo hi; echo oops >&2; exit 2"
    assert "hi" in lines
    assert "oops" in lines
    assert not text.lstrip().startswith("{")


async def test_name_timeout_and_wait_zero(served: DaemonHandle) -> None:
    sock = str(served.socket)
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
            [
                "bash",
                "run",
                "echo named",
                "--name",
                "greeting",
                "--wait",
                "30",
                "--json",
                "--socket",
                sock,
            ],
        )
        text = ok_text(started)
        assert text.startswith("task started: id=sleeper\n")
        timed_out = await hive("bash", "status", "sleeper", "--wait", "10", "--json", "--socket", sock)
    # A task that timed out: the CLI exits 124, as timeout(1) does.
    assert timed_out.returncode == 124, timed_out.stderr.decode()
    assert timed_out.stderr == b""
    ended = json.loads(timed_out.stdout)
    assert ended["id"] == "sleeper"
    assert ended["state"] == "timed_out"
    assert ended["timeout_secs"] == 0.5
    assert ended["signals"][0] == "SIGINT"
    greeting = ok_json(named)
    assert greeting["id"] == "greeting"
    assert greeting["stdout"]["tail"] == "named\n"


async def test_a_command_past_the_argument_limit_runs_from_stdin(served: DaemonHandle) -> None:
    """Linux refuses one argument over 128 KiB before hive runs; `-` takes it on stdin."""
    sock = str(served.socket)
    command = ": '" + "x" * (300 * 1024) + "'\necho from-stdin\n"
    with trio.fail_after(CLI_WITHIN):
        done = await hive(
            "bash",
            "run",
            "-",
            "--name",
            "from-stdin",
            "--wait",
            "30",
            "--json",
            "--socket",
            sock,
            stdin=command.encode(),
        )
    status = ok_json(done)
    assert status["state"] == "done"
    assert status["stdout"]["tail"] == "from-stdin\n"
    assert await trio.Path(status["cmd_path"]).read_text() == command


async def test_run_and_status_exit_with_the_tasks_status_and_a_long_wait_is_capped_aloud(
    served: DaemonHandle,
) -> None:
    sock = str(served.socket)
    with trio.fail_after(CLI_WITHIN):
        ran = await hive("bash", "run", "--wait", "100", "--name", "exit3", "--socket", sock, "exit", "3")
        asked = await hive("bash", "status", "exit3", "--socket", sock)
    assert ran.returncode == 3, ran.stderr.decode()
    assert ran.stdout.decode().startswith("task exit3: done, exit code 3")
    assert ran.stderr.decode() == "hive: --wait 100 is over the cap of 30 s: waiting 30 s at most\n"
    assert asked.returncode == 3, asked.stderr.decode()
    assert asked.stderr == b""


async def test_status_stop_and_ls(served: DaemonHandle, short_tmp: Path) -> None:
    sock = str(served.socket)
    gate = make_gate(short_tmp)  # "later" ends when the test says so
    later_cmd = f"read line < {gate}; echo later"
    with trio.fail_after(CLI_WITHIN):
        before = [t["id"] for t in ok_json(await hive("bash", "ls", "--json", "--socket", sock))["tasks"]]
        first = ok_json(
            await hive("bash", "run", "echo one", "--name", "one", "--wait", "30", "--json", "--socket", sock)
        )
        assert first["state"] == "done"
        later = ok_json(
            await hive(
                "bash",
                "run",
                later_cmd,
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
        assert later["state"] == "running"
        long = ok_json(
            await hive("bash", "run", "sleep 60", "--name", "long", "--wait", "0", "--json", "--socket", sock)
        )
        assert long["id"] == "long"

        await trio.to_thread.run_sync(gate.write_text, "go\n", abandon_on_cancel=True)
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
    # Every task, newest first: this test's, then those of the module's tests before it.
    assert [t["id"] for t in tasks] == ["long", "later", "one", *before]
    assert [t["state"] for t in tasks[:3]] == ["stopped", "done", "done"]
    assert [t["cmd"] for t in tasks[:3]] == ["sleep 60", later_cmd, "echo one"]
    created = [t["created_at"] for t in tasks]
    assert created == sorted(created, reverse=True)

    rows = ok_text(table).splitlines()
    assert rows[0].split("\t") == ["id", "state", "exit", "duration", "command"]
    assert [row.split("\t")[0] for row in rows[1:]] == ["long", "later", "one", *before]
    assert rows[1].split("\t")[1] == "stopped"
    assert rows[3].split("\t")[1:3] == ["done", "0"]
    assert rows[3].split("\t")[4] == "echo one"


async def test_errors_exit_1_with_a_message_on_stderr(served: DaemonHandle, short_tmp: Path) -> None:
    sock = str(served.socket)
    absent = short_tmp / "absent.sock"
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

    # A bad flag is a usage error, said in the CLI's terms before the daemon is asked.
    assert negative.returncode == 2
    assert negative.stdout == b""
    assert "argument --wait: '-1' is negative" in negative.stderr.decode()


async def test_help() -> None:
    with trio.fail_after(CLI_WITHIN):
        top, bash, run = await hive_all(["--help"], ["bash", "--help"], ["bash", "run", "--help"])
    assert ok_text(top).startswith("usage: hive")
    assert "demo" in top.stdout.decode() and "bash" in top.stdout.decode()
    bash_help = ok_text(bash)
    for command in ("run", "status", "stop", "ls", "tail"):
        assert command in bash_help
    run_help = ok_text(run)
    for option in ("--name", "--timeout", "--wait", "--json", "--socket", "--state-dir", "--file", "CMD"):
        assert option in run_help


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    """The CLI failed as it should: exit 1, nothing on stdout, one line ``hive: ...`` on stderr."""
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert done.stdout == b""
    assert err.startswith("hive: "), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err


async def test_errors_name_the_cli_flags_and_commands(served: DaemonHandle) -> None:
    sock = str(served.socket)
    with trio.fail_after(CLI_WITHIN):
        held = ok_json(
            await hive("bash", "run", "sleep 60", "--name", "held", "--wait", "0", "--json", "--socket", sock)
        )
        assert held["id"] == "held"
        wait, timeout, name, nan, busy, unknown = await hive_all(
            ["bash", "run", "true", "--wait", "-1", "--socket", sock],
            ["bash", "run", "true", "--timeout", "0", "--socket", sock],
            ["bash", "run", "true", "--name", "no spaces", "--socket", sock],
            ["bash", "status", "held", "--wait", "nan", "--socket", sock],
            ["bash", "run", "true", "--name", "held", "--socket", sock],
            ["bash", "status", "no-such-task", "--socket", sock],
        )
        ok_json(await hive("bash", "stop", "held", "--json", "--socket", sock))
    for done, flag in ((wait, "--wait"), (timeout, "--timeout"), (name, "--name"), (nan, "--wait")):
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert f"error: argument {flag}: " in err
        for mcp_term in ("wait_seconds", "timeout_secs"):
            assert mcp_term not in err
    # Refusals that only the daemon can make come back in the CLI's terms too.
    err = one_line_error(busy)
    assert "name 'held' is held by a task that is still running" in err
    assert "`hive bash status held --wait 30`" in err
    assert "`hive bash stop held`" in err
    assert "wait_seconds" not in err and "stop('held')" not in err
    err = one_line_error(unknown)
    assert "no task has id 'no-such-task'" in err
    assert "`hive bash ls` shows them all" in err
    assert "`list`" not in err


async def test_run_wait_0_tells_the_operator_what_to_do_and_that_no_agent_is_woken(
    served: DaemonHandle,
) -> None:
    """The daemon's answer is for the agent (its tools, its wake); this daemon has no agent socket,
    and its answer says so (``wake`` null), so the operator is told that no turn will follow."""
    sock = str(served.socket)
    with trio.fail_after(CLI_WITHIN):
        text = ok_text(await hive("bash", "run", "true", "--name", "quick", "--wait", "0", "--socket", sock))
        ended = ok_json(await hive("bash", "status", "quick", "--wait", "10", "--json", "--socket", sock))
    lines = text.splitlines()
    assert lines[0] == "task started: id=quick"
    assert "`hive bash status quick --wait 30` waits for it, `hive bash stop quick` ends it." in text
    assert f"stdout: {served.task_file('quick', '.out')}" in lines
    assert f"stderr: {served.task_file('quick', '.err')}" in lines
    assert "The daemon has no agent socket: no agent is woken when it ends." in lines
    assert "woken by a message" not in text
    assert "wait_seconds" not in text and "status('quick'" not in text
    assert ended["state"] == "done"


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_a_bad_answer_is_one_line_and_exit_1(short_tmp: Path, case: str) -> None:
    says = BAD_ANSWERS[case][1]
    with trio.fail_after(CLI_WITHIN):
        async with bad_daemon(short_tmp, case) as path:
            listed, ran = await hive_all(
                ["bash", "ls", "--socket", str(path)],
                ["bash", "run", "true", "--json", "--socket", str(path)],
            )
    for done in (listed, ran):
        err = one_line_error(done)
        assert says in err
        assert str(path) in err


@asynccontextmanager
async def spying_proxy(path: Path, upstream: Path, called: trio.Event) -> AsyncIterator[None]:
    """Relay connections on ``path`` to ``upstream``; ``called`` is set once a tools/call has gone up."""

    async def relay(client: trio.SocketStream) -> None:
        server = await trio.open_unix_socket(os.fspath(upstream))
        async with client, server, trio.open_nursery() as nursery:

            async def up() -> None:
                seen = b""
                async for data in client:
                    await server.send_all(data)
                    seen += data
                    if b'"tools/call"' in seen:
                        called.set()
                nursery.cancel_scope.cancel()

            async def down() -> None:
                try:
                    async for data in server:
                        await client.send_all(data)
                except trio.BrokenResourceError:
                    pass  # the daemon was killed
                nursery.cancel_scope.cancel()  # and so the client's connection closes

            nursery.start_soon(up)
            nursery.start_soon(down)

    async with open_unix_listener(path) as listener, trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, relay, [listener])
        yield
        nursery.cancel_scope.cancel()


async def test_a_daemon_that_goes_away_mid_call_is_one_line_and_exit_1(daemon: DaemonHandle) -> None:
    sock = str(daemon.socket)
    proxy = daemon.root / "proxy.sock"
    gate = make_gate(daemon.root)
    called = trio.Event()
    waited: list[subprocess.CompletedProcess[bytes]] = []

    async def wait_through_proxy() -> None:
        waited.append(await hive("bash", "status", "gated", "--wait", "30", "--socket", str(proxy)))

    with trio.fail_after(CLI_WITHIN):
        async with daemon.running(agent=False, stop=False) as process:
            ok_json(
                await hive(
                    "bash", "run", gated(gate), "--name", "gated", "--wait", "0", "--json", "--socket", sock
                )
            )
            pid = ok_json(await hive("bash", "status", "gated", "--json", "--socket", sock))["pid"]
            async with spying_proxy(proxy, daemon.socket, called), trio.open_nursery() as nursery:
                nursery.start_soon(wait_through_proxy)
                await called.wait()
                await sigkill(process)  # the daemon dies while `status --wait 30` waits for its answer
        open_gate(gate)  # the task outlives its daemon, as tasks do; let it end
        await wait_exited(pid)
    err = one_line_error(waited[0])
    assert f"hive-bash-daemon at {proxy} closed the connection before answering" in err


async def test_the_bash_commands_import_neither_the_mcp_sdk_nor_the_daemon(served: DaemonHandle) -> None:
    """`hive bash` starts in the time of a bare interpreter: none of the heavy imports on its path."""
    script = (
        "import json, sys\n"
        "from hive.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    sock = str(served.socket)
    with trio.fail_after(CLI_WITHIN):
        runs = [
            await trio.run_process(
                [sys.executable, "-c", script, "bash", *argv, "--socket", sock],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            for argv in (["ls"], ["run", "true"], ["status", "no-such-task"])
        ]
    heavy_roots = {"mcp", "mcp_types", "pydantic", "anyio", "trio", "attrs", "attr", "cattrs"}
    heavy_hive = (
        "hive.bash.daemon",
        "hive.bash._server",
        "hive.bash._tools",
        "hive.bash._task_manager",
        "hive.hive_run",
    )
    for done in runs:
        modules = json.loads(done.stderr.decode().splitlines()[-1])
        assert "hive.bash.client" in modules
        heavy = [m for m in modules if m.split(".")[0] in heavy_roots or m.startswith(heavy_hive)]
        assert heavy == []
    assert runs[0].returncode == 0
    assert runs[1].returncode == 0
    assert runs[2].returncode == 1
