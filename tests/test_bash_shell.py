"""Tasks run under bash, as `bash -c CMD` would, whatever the command's size (up to the cap); on
one daemon for the module, but where a test needs a working directory of its own."""

from __future__ import annotations

import os
import sys

from tests.helpers.daemon import DaemonHandle
from tests.helpers.inotify import wait_until
from tests.helpers.results import call, structured, text_of

MAX_CMD_BYTES = 1024 * 1024  # the documented cap (hive.bash._tools.MAX_CMD_BYTES)


async def test_commands_run_under_bash_as_bash_c_would(served: DaemonHandle) -> None:
    cmd = (
        'arr=(a b); [[ ${arr[1]} == b ]] && echo "$0 ${#arr[@]}" {1..3}\n'
        "set -o pipefail; false | true; echo pipefail=$?\n"
        "source /dev/null && echo sourced\n"
        'echo "args=$# lineno=$LINENO"\n'
        "set | grep -c '^__hive' || true\n"
        "exit 3"
    )
    async with served.session() as session:
        result = await call(session, "run", cmd=cmd, wait_seconds=20)
        status = structured(result)
        assert status["stderr"]["tail"] == ""
        assert status["stdout"]["tail"] == "bash 2 1 2 3\npipefail=1\nsourced\nargs=0 lineno=4\n0\n"
        assert (status["state"], status["exit_code"]) == ("done", 3)
        # The command reads an empty stdin, as it did when it was an argument.
        status = structured(await call(session, "run", cmd="wc -c; echo $BASH_VERSION", wait_seconds=20))
        lines = status["stdout"]["tail"].splitlines()
        assert lines[0] == "0"
        assert lines[1]  # bash's version: the command ran in bash


async def test_a_sigint_stops_the_foreground_command_and_records_130(served: DaemonHandle) -> None:
    async with served.session() as session:
        started = structured(
            await call(session, "run", cmd="echo before; sleep 60; echo after", wait_seconds=0)
        )
        # The command runs (its wrapper has set its trap) once it has written its first line; a
        # SIGINT before then ends the wrapper itself, and no command ever ran to record 130.
        out = served.task_file(started["id"], ".out")
        await wait_until(lambda: out.read_bytes() == b"before\n", out.parent)
        stopped = structured(await call(session, "stop", id=started["id"]))
        assert (stopped["state"], stopped["exit_code"], stopped["signals"]) == ("stopped", 130, ["SIGINT"])
        assert stopped["stdout"]["tail"] == "before\n"


async def test_a_task_that_ignores_sigint_and_exits_later_records_its_own_status(
    served: DaemonHandle,
) -> None:
    ignore = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(1); print('late')"
    cmd = f"trap '' INT; sleep 1; {sys.executable} -c \"{ignore}\"; exit 5"
    async with served.session() as session:
        result = structured(await call(session, "run", cmd=cmd, timeout_secs=0.3, wait_seconds=20))
        assert (result["state"], result["exit_code"], result["signals"]) == ("timed_out", 5, ["SIGINT"])
        assert result["stdout"]["tail"] == "late\n"


async def test_a_600_kib_command_runs_and_its_whole_text_is_kept(served: DaemonHandle) -> None:
    body = "x" * (600 * 1024)
    cmd = f"s='{body}'\necho ${{#s}}; echo done >&2"
    async with served.session() as session:
        result = await call(session, "run", cmd=cmd, name="big", wait_seconds=20)
        status = structured(result)
        assert (status["state"], status["exit_code"]) == ("done", 0), text_of(result)
        assert status["stdout"]["tail"] == f"{len(body)}\n"
        assert status["stderr"]["tail"] == "done\n"
        # The answer shows the start of the command and where the whole of it is.
        assert len(text_of(result)) < 8 * 1024
        assert status["cmd"].startswith("s='xxx") and f"{len(cmd)} bytes in all" in status["cmd"]
        with open(status["cmd_path"]) as f:
            assert f.read() == cmd
        listed = structured(await call(session, "list"))["tasks"][0]
        assert listed["id"] == "big" and len(listed["cmd"]) < 4096


async def test_a_command_over_the_cap_is_refused_saying_the_cap(served: DaemonHandle) -> None:
    cmd = "true #" + "x" * (MAX_CMD_BYTES + 100 * 1024)
    async with served.session() as session:
        before = structured(await call(session, "list"))["total"]  # the module's other tasks
        result = await call(session, "run", cmd=cmd)
        assert result.is_error
        text = text_of(result)
        assert f"cap of {MAX_CMD_BYTES} bytes (1 MiB)" in text
        assert structured(result)["error"] == "BadArgument"
        assert structured(await call(session, "list"))["total"] == before  # nothing was recorded
        # Exactly at the cap is fine.
        at_cap = "true #" + "x" * (MAX_CMD_BYTES - len("true #"))
        assert structured(await call(session, "run", cmd=at_cap, wait_seconds=20))["exit_code"] == 0


async def test_a_process_that_cannot_start_is_reported_as_that_not_as_a_disk_error(
    daemon: DaemonHandle,
) -> None:
    workdir = daemon.root / "work"
    workdir.mkdir()
    async with daemon.running("--workdir", str(workdir), agent=False), daemon.session() as session:
        os.rmdir(workdir)
        result = await call(session, "run", cmd="echo hi", name="nowhere")
        assert result.is_error
        text = text_of(result)
        assert f"its working directory {workdir}: No such file or directory" in text
        assert "disk" not in text and "free space" not in text
        assert structured(result)["error"] == "SpawnError"
        # Nothing of the failed start is left: no task, no files.
        assert structured(await call(session, "list"))["total"] == 0
        assert sorted(os.listdir(daemon.state_dir / "bash-tasks")) == []
        workdir.mkdir()
        assert structured(await call(session, "run", cmd="echo hi", name="nowhere"))["exit_code"] == 0
