"""The units nix/module.nix generates, run as systemd would run them.

Nix evaluates the module (``nix/tests/eval.nix``, as ``nix/tests/check.sh`` does); each unit's
``ExecStart=`` is split and unescaped as systemd reads it, its store paths replaced by this
venv's programs, and run with the unit's ``Environment=`` (unescaped likewise), in its
``WorkingDirectory=``, with a ``NOTIFY_SOCKET`` for ``Type=notify`` and the unit's
``KillSignal=`` to stop it. What the tests show: every variable a unit sets is one its program
reads (``RuntimeSpec.from_env``, or documented in the program's ``--help``); the daemon's unit
starts a daemon that says READY=1 on the socket the agent's unit names, serves the ``bash``
entry of the generated MCP configuration, sends its wakes to the agent's socket, and ends at
SIGINT; the agent's unit runs ``hive-agent`` on that daemon with the runtime the module chose.

Without ``nix-instantiate`` these tests skip on a developer's machine and fail under
``CI=true`` (``.ci/run`` installs Debian's ``nix-bin``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters

from hive.runtime import Backend, RuntimeSpec
from tests.helpers.daemon import REPO
from tests.helpers.listener import AgentListener
from tests.helpers.mcp_stdio import stdio_session
from tests.helpers.results import call, structured, text_of

VENV_BIN = Path(sys.executable).parent
RUNTIME_VARIABLES = frozenset(
    {"HIVE_RUNTIME", "HIVE_CLAUDE_COMMAND", "HIVE_ACP_COMMAND", "HIVE_ACP_ARGS", "HIVE_ACP_ENV"}
)
"""What ``RuntimeSpec.from_env`` reads (``test_runtime_spec_reads_the_agent_units`` shows each counts)."""


# -- evaluating the module -------------------------------------------------------------------------


def nix_instantiate() -> str:
    found = shutil.which("nix-instantiate")
    if found is None:
        why = "nix-instantiate is not installed (Debian: apt-get install nix-bin); .ci/run installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return found


def nix_string(text: str) -> str:
    """``text`` as a Nix string literal."""
    return json.dumps(text).replace("${", "\\${")


def evaluate(case: str) -> dict[str, Any]:
    """What the module generates for the configuration module ``case`` (a Nix expression)."""
    env = {**os.environ, "NIX_CONFIG": "build-users-group ="}
    done = subprocess.run(
        [
            nix_instantiate(),
            "--readonly-mode",
            "--eval",
            "--strict",
            "--json",
            "--arg",
            "case",
            case,
            EVAL_NIX,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


EVAL_NIX = str(REPO / "nix" / "tests" / "eval.nix")
EXAMPLE = f'args: removeAttrs (import {REPO / "nix" / "examples" / "two-agents.nix"} args) [ "imports" ]'


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    """The README's example: "scribe" on claude, "reviewer" on an ACP agent."""
    return evaluate(EXAMPLE)


# -- reading units as systemd does -------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\", "/": "/"}


class NotPlain(ValueError):
    """A unit line holds something systemd would expand (a specifier or a variable)."""


def _specifiers(text: str) -> str:
    """``%%`` is ``%``; any other ``%`` is a specifier systemd would expand."""
    if re.search(r"%(?!%)", text.replace("%%", "")):
        raise NotPlain(f"a bare % (a systemd specifier) in {text!r}")
    return text.replace("%%", "%")


def exec_words(line: str) -> list[str]:
    """An ``ExecStart=`` value split into words as systemd splits it (quotes, C escapes, ``%%``,
    ``$$``); a specifier or a variable, which systemd would expand, is an error."""
    words: list[str] = []
    i = 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        word = []
        quote = line[i] if line[i] in "\"'" else None
        i += 1 if quote else 0
        while i < len(line) and (line[i] != quote if quote else line[i] != " "):
            char = line[i]
            if char == "\\":
                code = line[i + 1]
                if code == "u":
                    word.append(chr(int(line[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                word.append(_ESCAPES[code])
                i += 2
                continue
            if char == "$":
                if line[i + 1 : i + 2] != "$":
                    raise NotPlain(f"a bare $ (a systemd variable) in {line!r}")
                i += 1
            word.append(char)
            i += 1
        if quote and i >= len(line):
            raise NotPlain(f"an unterminated quote in {line!r}")
        i += 1 if quote else 0
        words.append(_specifiers("".join(word)))
    return words


def unit_environment(unit: Mapping[str, Any]) -> dict[str, str]:
    """The unit's ``Environment=`` as its process sees it."""
    return {name: _specifiers(value) for name, value in unit["environment"].items()}


def environment_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines, as systemd's ``EnvironmentFile=`` reads the plain ones."""
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def program_of(argv: list[str], package: str) -> Path:
    """The venv's program for the store path ``argv[0]`` of the hive package."""
    prefix = f"{package}/bin/"
    assert argv[0].startswith(prefix), f"{argv[0]} is not a program of the hive package {package}"
    return VENV_BIN / argv[0].removeprefix(prefix)


def documented_variables(program: Path) -> set[str]:
    done = subprocess.run([str(program), "--help"], capture_output=True, text=True, timeout=60, check=True)
    return set(re.findall(r"\bHIVE_[A-Z_]+\b", done.stdout))


def test_exec_words_reads_systemd_quoting() -> None:
    assert exec_words('"/bin/x" "a b" "100%%" "$$HOME" "say \\"hi\\"" "two\\nlines" plain') == [
        "/bin/x",
        "a b",
        "100%",
        "$HOME",
        'say "hi"',
        "two\nlines",
        "plain",
    ]
    with pytest.raises(NotPlain):
        exec_words('"/bin/x" "%h"')
    with pytest.raises(NotPlain):
        exec_words('"/bin/x" "$HOME"')


# -- the environment the units give --------------------------------------------------------------------


def test_runtime_spec_reads_the_agent_units(example: dict[str, Any]) -> None:
    scribe = RuntimeSpec.from_env(unit_environment(example["services"]["hive-agent-scribe"]))
    assert scribe.backend is Backend.CLAUDE
    assert re.fullmatch(r"/nix/store/[^/]+-claude-code-[^/]+/bin/claude", scribe.claude_command)
    reviewer = RuntimeSpec.from_env(unit_environment(example["services"]["hive-agent-reviewer"]))
    assert reviewer.backend is Backend.ACP
    assert reviewer.command is not None and reviewer.command.endswith("/bin/npx")
    assert reviewer.args == ("--yes", "@agentclientprotocol/claude-agent-acp@0.101.0")
    assert reviewer.env == (("DISABLE_AUTOUPDATER", "1"),)


def test_runtime_spec_reads_values_systemd_would_mangle() -> None:
    """%, $, quotes, backslashes and newlines reach RuntimeSpec as they were configured."""
    args = ["--home=%h", "$HOME", "${USER}", 'say "hi"', "two\nlines", "back\\slash", "100%"]
    env = {"PERCENT": "100%", "DOLLAR": "$PATH", "QUOTE": '"'}
    prompt = 'Be "kind" to 100% of\n$USERS.'
    nix_args = " ".join(nix_string(a) for a in args)
    nix_env = " ".join(f"{k} = {nix_string(v)};" for k, v in env.items())
    case = (
        '{ services.hyperhive.agents.e = { runtime = "acp"; '
        f"acp.command = {nix_string('/opt/run%n')}; acp.args = [ {nix_args} ]; acp.env = {{ {nix_env} }}; "
        f"model = {nix_string('m%i$x')}; systemPrompt = {nix_string(prompt)}; }}; }}"
    )
    unit = evaluate(case)["services"]["hive-agent-e"]
    spec = RuntimeSpec.from_env(unit_environment(unit))
    assert spec.command == "/opt/run%n"
    assert spec.args == tuple(args)
    assert dict(spec.env) == env
    argv = exec_words(unit["serviceConfig"]["ExecStart"])
    assert argv[3:] == ["--model", "m%i$x", "--system-prompt", prompt]


def test_every_daemon_unit_variable_is_documented_by_hive_bash_daemon(example: dict[str, Any]) -> None:
    package = example["package"]["path"]
    for name in ("scribe", "reviewer"):
        unit = example["services"][f"hive-bash-daemon-{name}"]
        argv = exec_words(unit["serviceConfig"]["ExecStart"])
        assert argv == [f"{package}/bin/hive-bash-daemon"]
        documented = documented_variables(program_of(argv, package))
        assert set(unit["environment"]) <= documented, set(unit["environment"]) - documented


def test_every_agent_unit_variable_is_read_by_hive_agent(example: dict[str, Any], hive_agent: Path) -> None:
    documented = documented_variables(hive_agent) | RUNTIME_VARIABLES
    for name in ("scribe", "reviewer"):
        unit = example["services"][f"hive-agent-{name}"]
        assert set(unit["environment"]) <= documented, set(unit["environment"]) - documented


def test_every_agent_unit_flag_is_one_hive_agent_takes(example: dict[str, Any], hive_agent: Path) -> None:
    done = subprocess.run([str(hive_agent), "--help"], capture_output=True, text=True, timeout=60, check=True)
    for name in ("scribe", "reviewer"):
        argv = exec_words(example["services"][f"hive-agent-{name}"]["serviceConfig"]["ExecStart"])
        flags = {word for word in argv[1:] if word.startswith("--")}
        assert flags, argv
        missing = {
            flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", done.stdout)
        }
        assert not missing, f"hive-agent --help does not name {sorted(missing)}"


@pytest.fixture
def hive_agent() -> Path:
    program = VENV_BIN / "hive-agent"
    if not program.exists():
        pytest.skip(f"{program} is not installed yet (issue 9): the agent unit's part runs once it is")
    return program


# -- running the units -------------------------------------------------------------------------------


@attrs.frozen
class Host:
    """A configuration evaluated with its paths under ``root``, and its tmpfiles and /etc applied."""

    root: Path
    generated: dict[str, Any]

    @property
    def package(self) -> str:
        return str(self.generated["package"]["path"])

    def unit(self, name: str) -> dict[str, Any]:
        unit: dict[str, Any] = self.generated["services"][name]
        return unit

    def argv(self, unit: str) -> list[str]:
        """The unit's command line, with the package's programs taken from the venv and /etc
        files from this host's."""
        words = exec_words(self.unit(unit)["serviceConfig"]["ExecStart"])
        return [str(program_of(words, self.package))] + [self.etc_path(word) for word in words[1:]]

    def etc_path(self, word: str) -> str:
        return str(self.root / "etc" / word.removeprefix("/etc/")) if word.startswith("/etc/") else word

    def environment(self, unit: str) -> dict[str, str]:
        """What systemd gives the unit's process: PATH from the unit's `path`, HOME, the
        unit's Environment= and EnvironmentFile=."""
        config = self.unit(unit)
        path = [str(VENV_BIN) if entry == self.package else None for entry in config["path"]]
        env = {
            "PATH": ":".join([p for p in path if p] + ["/usr/bin", "/bin"]),
            "HOME": str(self.root / "home"),
            "LANG": "C.UTF-8",
            **unit_environment(config),
        }
        if "EnvironmentFile" in config["serviceConfig"]:
            env |= environment_file(Path(config["serviceConfig"]["EnvironmentFile"]))
        return env

    def mcp_config(self, agent: str) -> dict[str, Any]:
        config: dict[str, Any] = json.loads(self.generated["etc"][f"hyperhive/{agent}/mcp.json"])
        return config


@pytest.fixture
def host(short_tmp: Path) -> Iterator[Host]:
    """Two agents whose runtimes are hive's fakes, their paths under a temporary root."""
    root = short_tmp
    (root / "home").mkdir()
    (root / "claude.env").write_text(
        f"FAKE_CLAUDE_RECORD={root / 'claude.fifo'}\nFAKE_CLAUDE_TURN=1\nFAKE_CLAUDE_MAX_SECONDS=120\n"
    )
    os.mkfifo(root / "claude.fifo")
    os.mkfifo(root / "acp.fifo")
    case = f"""{{
      services.hyperhive = {{
        runtimeDir = {nix_string(str(root / "run"))};
        agents.scripted = {{
          runtime = "acp";
          acp.command = {nix_string(sys.executable)};
          acp.args = [ {nix_string(str(REPO / "fixtures" / "acp_agent.py"))} ];
          acp.env = {{ FAKE_ACP_RECORD = {nix_string(str(root / "acp.fifo"))}; FAKE_ACP_MAX_SECONDS = "120"; }};
          stateDir = {nix_string(str(root / "state" / "scripted"))};
          model = "m1";
          idleTimeout = 60;
          compactAt = 0.9;
          systemPrompt = "You are scripted.";
          extraMcpServers.echo = {{ command = "/bin/cat"; allowedTools = [ "*" ]; }};
        }};
        agents.faked = {{
          claude.command = {nix_string(str(REPO / "fixtures" / "fake_claude.py"))};
          stateDir = {nix_string(str(root / "state" / "faked"))};
          environmentFile = {nix_string(str(root / "claude.env"))};
          model = "m2";
          permission = "accept_edits";
        }};
      }};
    }}"""
    generated = evaluate(case)
    # What NixOS's activation does first: the tmpfiles rules and /etc.
    for rule in generated["tmpfiles"]:
        kind, path, mode, *_ = rule.split()
        assert kind == "d" and path.startswith(str(root)), rule
        Path(path).mkdir(parents=True, exist_ok=True)
        os.chmod(path, int(mode, 8))
    for name, text in generated["etc"].items():
        (root / "etc" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "etc" / name).write_text(text)
    yield Host(root, generated)


@asynccontextmanager
async def notify_socket(path: Path) -> AsyncIterator[trio.socket.SocketType]:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with sock:
        await sock.bind(os.fspath(path))
        yield sock


@asynccontextmanager
async def running_unit(host: Host, unit: str) -> AsyncIterator[trio.Process]:
    """The unit's process, started as systemd starts it and, for Type=notify, once it is ready;
    stopped at the end with the unit's KillSignal= (it must exit 0)."""
    config = host.unit(unit)["serviceConfig"]
    assert config["Type"] == "notify"
    async with notify_socket(host.root / f"{unit}.notify") as notify:
        env = host.environment(unit) | {"NOTIFY_SOCKET": str(host.root / f"{unit}.notify")}
        with open(host.root / f"{unit}.err", "ab") as err:
            process = await trio.lowlevel.open_process(
                host.argv(unit), env=env, cwd=config["WorkingDirectory"], stderr=err
            )
        try:
            await wait_ready(notify, process, unit, host.root / f"{unit}.err")
            yield process
            process.send_signal(signal.Signals[config["KillSignal"]])
            with trio.fail_after(60):
                code = await process.wait()
            assert code == 0, (host.root / f"{unit}.err").read_text()
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                with trio.move_on_after(30, shield=True):
                    await process.wait()


async def wait_ready(notify: trio.socket.SocketType, process: trio.Process, unit: str, errlog: Path) -> None:
    """READY=1 from the process, as systemd waits for it; its exit first fails the test."""
    exited: int | None = None

    async def watch_exit(scope: trio.CancelScope) -> None:
        nonlocal exited
        exited = await process.wait()
        scope.cancel()

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_exit, nursery.cancel_scope)
            while b"READY=1" not in (await notify.recv(4096)).split(b"\n"):
                pass
            nursery.cancel_scope.cancel()
    assert exited is None, f"{unit} exited with {exited} before READY=1: {errlog.read_text()}"


@asynccontextmanager
async def mcp_session(server: Mapping[str, Any], host: Host, unit: str) -> AsyncIterator[ClientSession]:
    """An MCP client session with an entry of the generated MCP configuration, spawned as the
    agent would spawn it (in the agent unit's environment, with the entry's own)."""
    command = server["command"]
    if command.startswith(f"{host.package}/bin/"):
        command = str(program_of([command], host.package))
    env = host.environment(unit) | server["env"]
    params = StdioServerParameters(command=command, args=server["args"], env=env)
    async with stdio_session(params, host.root / "mcp.err") as session:
        yield session


async def test_the_daemon_unit_serves_the_bash_server_of_the_mcp_config_and_wakes_the_agent_socket(
    host: Host,
) -> None:
    env = host.environment("hive-bash-daemon-scripted")
    agent_env = host.environment("hive-agent-scripted")
    assert env["HIVE_AGENT_SOCKET"] == agent_env["HIVE_AGENT_SOCKET"]
    bash_socket = Path(env["HIVE_BASH_SOCKET"])
    listener = AgentListener(Path(agent_env["HIVE_AGENT_SOCKET"]))
    bash = host.mcp_config("scripted")["mcpServers"]["bash"]
    assert bash["allowedTools"] == ["*"]
    assert (
        bash["args"] == ["--socket", str(bash_socket)]
        and env["HIVE_BASH_SOCKET"] == agent_env["HIVE_BASH_SOCKET"]
    )
    async with (
        listener.serving(),
        running_unit(host, "hive-bash-daemon-scripted"),
        mcp_session(bash, host, "hive-agent-scripted") as session,
    ):
        assert stat.S_IMODE(bash_socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(bash_socket.parent.stat().st_mode) == 0o700
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {"run", "status", "stop", "list"} <= tools
        result = await call(session, "run", cmd="pwd", wait_seconds=30)
        assert not result.is_error, text_of(result)
        assert structured(result)["stdout"]["tail"] == f"{env['HIVE_BASH_WORKDIR']}\n"
        await call(session, "run", cmd="true", name="ended", wait_seconds=0)
        with trio.fail_after(30):
            wakes = await listener.wait_for(2)
        # The end answered inline goes to the agent socket too, marked as shown (the harness
        # settles it with its turn); the other is the ordinary wake of the task that ended.
        assert sorted((w.sender.startswith("bash-task-ended"), w.shown_at is not None) for w in wakes) == [
            (False, True),
            (True, False),
        ], wakes
    assert not bash_socket.exists()  # removed at the SIGINT stop
    assert (Path(env["HIVE_STATE_DIR"]) / "bash-tasks").is_dir()


@asynccontextmanager
async def read_events(fifo: Path) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """A fake agent's record, event by event, from a FIFO (held open for writing too, so the
    agent's exit is not the end). Opened at once: a fake that opens it to write (an ACP agent,
    which hive-agent starts before it is ready) is not held up waiting for a reader."""
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    async with trio.lowlevel.FdStream(fd) as stream:

        async def events() -> AsyncGenerator[dict[str, Any], None]:
            buffer = b""
            while True:
                while b"\n" not in buffer:
                    buffer += await stream.receive_some()
                line, buffer = buffer.split(b"\n", 1)
                yield json.loads(line)

        async with aclosing(events()) as each:
            yield each


async def agent_request(path: str, request: Mapping[str, Any]) -> dict[str, Any]:
    stream = await trio.open_unix_socket(path)
    async with stream:
        await stream.send_all(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = await stream.receive_some()
            assert chunk, f"the agent socket closed without answering {request}"
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    return reply


async def test_the_agent_unit_runs_an_acp_agent_on_its_daemon(host: Host, hive_agent: Path) -> None:
    env = host.environment("hive-agent-scripted")
    async with (
        read_events(host.root / "acp.fifo") as events,
        running_unit(host, "hive-bash-daemon-scripted"),
        running_unit(host, "hive-agent-scripted"),
    ):
        agent_socket = Path(env["HIVE_AGENT_SOCKET"])
        assert stat.S_IMODE(agent_socket.stat().st_mode) == 0o600
        status = await agent_request(str(agent_socket), {"type": "status"})
        assert status["ok"] is True, status
        reply = await agent_request(
            str(agent_socket), {"type": "wake", "from": "nix-test", "body": "unit wake body"}
        )
        assert reply["ok"] is True, reply
        seen: dict[str, dict[str, Any]] = {}
        with trio.fail_after(120):
            async for event in events:
                seen.setdefault(event["event"], event)
                if event["event"] == "prompt":
                    break
    assert "unit wake body" in seen["prompt"]["text"]
    # The agent is the configured command, with its args and env (HIVE_ACP_*), in the unit's
    # working directory; its session has the generated MCP servers.
    assert seen["start"]["argv"][-1] == str(REPO / "fixtures" / "acp_agent.py")
    assert seen["start"]["env"]["FAKE_ACP_MAX_SECONDS"] == "120"
    assert seen["new_session"]["cwd"] == host.unit("hive-agent-scripted")["serviceConfig"]["WorkingDirectory"]
    servers = {server["name"]: server for server in seen["new_session"]["mcpServers"]}
    assert {"bash", "echo"} <= set(servers)
    assert servers["echo"]["command"] == "/bin/cat"  # the module's extraMcpServers reached the agent
    assert not agent_socket.exists()


async def test_the_agent_unit_runs_claude_with_its_environment_file(host: Host, hive_agent: Path) -> None:
    env = host.environment("hive-agent-faked")
    assert env["HIVE_CLAUDE_COMMAND"] == str(REPO / "fixtures" / "fake_claude.py")
    async with (
        read_events(host.root / "claude.fifo") as events,
        running_unit(host, "hive-bash-daemon-faked"),
        running_unit(host, "hive-agent-faked"),
    ):
        status = await agent_request(env["HIVE_AGENT_SOCKET"], {"type": "status"})
        assert status["ok"] is True, status
        reply = await agent_request(
            env["HIVE_AGENT_SOCKET"], {"type": "wake", "from": "nix-test", "body": "claude wake body"}
        )
        assert reply["ok"] is True, reply
        with trio.fail_after(120):
            async for event in events:
                if event["event"] == "start":
                    start = event
                    break
    # The fake claude read FAKE_CLAUDE_* from the unit's EnvironmentFile= (through hive-agent).
    assert "claude wake body" in start["prompt"]
    assert start["options"]["model"] == "m2"
    # The module's permission policy reached hive-agent (HIVE_PERMISSION), which gave it to claude.
    assert start["options"]["permission_mode"] == "acceptEdits"
