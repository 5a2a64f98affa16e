"""``hive-agent``'s flags, their environment defaults, --mcp-config, and the runtime config they make."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hive.agent._options import (
    OptionsError,
    build_parser,
    hyperhive_relay_server,
    parse_options,
    read_mcp_config,
    relay_server,
)
from hive.agent.harness import runtime_config, warn_without_bash_daemon
from hive.runtime import Backend, HttpServer, Permission, RuntimeSpec, StdioServer

FLAGS = [
    "--state-dir",
    "--agent-socket",
    "--bash-socket",
    "--system-prompt",
    "--model",
    "--effort",
    "--idle-timeout",
    "--stop-grace",
    "--compact-at",
    "--mcp-config",
    "--with-bash-daemon",
    "--subagents",
]


def test_help_explains_every_flag_and_its_environment_variable() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hive.agent.harness", "--help"], capture_output=True, text=True, check=True
    )
    text = " ".join(done.stdout.split())
    for flag in FLAGS:
        assert flag in text
    for variable in (
        "HIVE_STATE_DIR",
        "HIVE_AGENT_SOCKET",
        "HIVE_BASH_SOCKET",
        "HIVE_COMPACT_AT",
        "HIVE_STOP_GRACE",
    ):
        assert variable in text
    assert "SIGINT or SIGTERM" in text


def test_help_tells_an_idle_turn_as_logged_and_the_log_level_with_its_default() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "logged as failed" not in text
    assert "the turn is logged `idle`" in text
    assert "--log-level LEVEL what to log on stderr: debug, info" in text
    assert "[HIVE_LOG_LEVEL; default info]" in text
    assert "[HIVE_STOP_GRACE; default 10]" in text


def test_defaults_come_from_the_state_dir(tmp_path: Path) -> None:
    options = parse_options([], env={"HIVE_STATE_DIR": str(tmp_path)})
    assert options.state_dir == tmp_path
    assert options.agent_socket == tmp_path / "agent.sock"
    assert options.bash_socket == tmp_path / "bash.sock"
    assert options.turns.compaction.watermark == 0.8
    assert options.turns.idle_timeout is None
    assert options.turns.stop_grace == 10
    assert not options.with_bash_daemon
    assert options.turns.permission is Permission.DEFAULT


def test_the_environment_sets_each_flag_and_a_flag_wins(tmp_path: Path) -> None:
    env = {
        "HIVE_STATE_DIR": str(tmp_path),
        "HIVE_AGENT_SOCKET": str(tmp_path / "a.sock"),
        "HIVE_BASH_SOCKET": str(tmp_path / "b.sock"),
        "HIVE_SYSTEM_PROMPT": "be brief",
        "HIVE_MODEL": "sonnet",
        "HIVE_EFFORT": "high",
        "HIVE_IDLE_TIMEOUT": "90",
        "HIVE_STOP_GRACE": "3",
        "HIVE_COMPACT_AT": "0.5",
        "HIVE_WITH_BASH_DAEMON": "1",
        "HIVE_PERMISSION": "accept_edits",
    }
    options = parse_options([], env=env)
    assert (options.agent_socket, options.bash_socket) == (tmp_path / "a.sock", tmp_path / "b.sock")
    turns = options.turns
    assert (turns.system_prompt, turns.model, turns.effort) == ("be brief", "sonnet", "high")
    assert turns.idle_timeout == 90
    assert turns.stop_grace == 3
    assert turns.compaction.watermark == 0.5
    assert options.with_bash_daemon
    assert turns.permission is Permission.ACCEPT_EDITS
    flags = parse_options(
        ["--model", "opus", "--compact-at", "off", "--idle-timeout", "5", "--stop-grace", "0"], env=env
    )
    turns = flags.turns
    assert (turns.model, turns.compaction.watermark, turns.idle_timeout) == ("opus", None, 5)
    assert turns.stop_grace == 0
    assert runtime_config(flags, RuntimeSpec()).stop_grace == 0


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--idle-timeout", "soon"], {}, "--idle-timeout: 'soon' is not a number"),
        ([], {"HIVE_IDLE_TIMEOUT": "-1"}, "HIVE_IDLE_TIMEOUT"),
        (["--idle-timeout", "inf"], {}, "--idle-timeout: 'inf' is not a number of seconds above 0"),
        (["--idle-timeout", "0"], {}, "--idle-timeout: '0' is not a number of seconds above 0"),
        (["--compact-at", "2"], {}, "--compact-at: '2' is not a fraction"),
        ([], {"HIVE_COMPACT_AT": "nan"}, "HIVE_COMPACT_AT: 'nan' is not a fraction"),
        (["--stop-grace", "-3"], {}, "--stop-grace: '-3' is not a number of seconds of 0 or more"),
        ([], {"HIVE_STOP_GRACE": "inf"}, "HIVE_STOP_GRACE: 'inf' is not a number of seconds"),
        ([], {"HIVE_WITH_BASH_DAEMON": "maybe"}, "HIVE_WITH_BASH_DAEMON"),
        ([], {"HIVE_PERMISSION": "sometimes"}, "HIVE_PERMISSION"),
    ],
)
def test_a_bad_value_is_refused_naming_where_it_came_from(
    tmp_path: Path, argv: list[str], env: dict[str, str], says: str
) -> None:
    with pytest.raises(OptionsError, match=says):
        parse_options(argv, env={"HIVE_STATE_DIR": str(tmp_path), **env})


def test_mcp_config_reads_stdio_and_http_entries(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": "notes-mcp", "args": ["--db", "x"], "env": {"K": "v"}},
                    "web": {"type": "http", "url": "https://example.org/mcp", "headers": {"X-Key": "k"}},
                    "picky": {"type": "stdio", "command": "p", "allowedTools": ["read", "list"]},
                }
            }
        )
    )
    servers, allowed = read_mcp_config(path)
    assert servers == (
        StdioServer("notes", "notes-mcp", ("--db", "x"), (("K", "v"),)),
        HttpServer("web", "https://example.org/mcp", (("X-Key", "k"),)),
        StdioServer("picky", "p", allow_all_tools=False),
    )
    assert allowed == ("mcp__picky__read", "mcp__picky__list")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json", "not JSON"),
        ('{"servers": {}}', "mcpServers"),
        ('{"mcpServers": {"subagent": {"command": "x"}}}', "hive's own"),
        ('{"mcpServers": {"hyperhive": {"type": "http", "url": "http://x"}}}', "hive's own"),
        ('{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}', "type 'sse' is not served"),
        ('{"mcpServers": {"a": {"type": "http"}}}', 'needs "url"'),
        (
            '{"mcpServers": {"a": {"args": ["x"]}}}',
            'server \'a\': says neither "command" \\(a stdio server\\) nor "type"',
        ),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "object of strings"),
        ('{"mcpServers": {"a": {"command": "x", "allowedTools": "all"}}}', "allowedTools"),
    ],
)
def test_a_bad_mcp_config_is_refused_saying_what_is_wrong(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(OptionsError, match=says):
        read_mcp_config(path)


def test_every_agent_gets_the_bash_relay_and_hyperhive_and_claude_loses_builtin_bash(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    # A config that brings a bash of its own (as the NixOS module's does) gets hive's relay instead.
    path.write_text('{"mcpServers": {"notes": {"command": "notes-mcp"}, "bash": {"command": "other"}}}')
    options = parse_options(["--mcp-config", str(path)], env={"HIVE_STATE_DIR": str(tmp_path)})
    claude = runtime_config(options, RuntimeSpec())
    assert [s.name for s in claude.mcp_servers] == ["bash", "hyperhive", "notes"]
    assert claude.mcp_servers[0] == relay_server(tmp_path / "bash.sock")
    # The hyperhive tools through their relay, to the harness's own socket in its state dir.
    hyperhive = claude.mcp_servers[1]
    assert hyperhive == hyperhive_relay_server(tmp_path / "hyperhive.sock")
    assert isinstance(hyperhive, StdioServer)
    assert (
        Path(hyperhive.command).name == "hive-hyperhive-mcp" or "hive.agent.hyperhive_mcp" in hyperhive.args
    )
    assert hyperhive.args[-2:] == ("--socket", str(tmp_path / "hyperhive.sock"))
    assert all(s.allow_all_tools for s in claude.mcp_servers)
    assert claude.disallowed_tools == ("Bash",)
    acp = runtime_config(options, RuntimeSpec(backend=Backend.ACP, command="agent"))
    assert acp.disallowed_tools == ()
    assert [s.name for s in acp.mcp_servers] == ["bash", "hyperhive", "notes"]


def test_subagents_add_the_subagent_server_waking_this_agent(tmp_path: Path) -> None:
    options = parse_options(["--subagents"], env={"HIVE_STATE_DIR": str(tmp_path)})
    config = runtime_config(options, RuntimeSpec())
    subagent = config.mcp_servers[-1]
    assert isinstance(subagent, StdioServer)
    assert subagent.name == "subagent" and subagent.allow_all_tools
    # The daemon is the harness's, which says where it tells its outages (the server starts none).
    assert subagent.args[-6:] == (
        "--state-dir",
        str(tmp_path),
        "--socket",
        str(tmp_path / "subagent.sock"),
        "--outage-file",
        str(tmp_path / "subagent-daemon-down"),
    )
    assert dict(subagent.env) == {"HIVE_AGENT_SOCKET": str(tmp_path / "agent.sock")}
    assert parse_options([], env={"HIVE_STATE_DIR": str(tmp_path), "HIVE_SUBAGENTS": "1"}).subagents
    assert not parse_options([], env={"HIVE_STATE_DIR": str(tmp_path)}).subagents


def test_a_bad_setting_exits_2_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hive.agent.harness", "--state-dir", str(tmp_path), "--compact-at", "7"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("hive-agent: --compact-at")
    assert len(done.stderr.strip().splitlines()) == 1


async def test_a_start_without_a_bash_daemon_is_warned_of_saying_how_to_start_one(
    short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options = parse_options([], env={"HIVE_STATE_DIR": str(short_tmp)})
    with caplog.at_level(logging.WARNING, logger="hive.agent"):
        await warn_without_bash_daemon(options)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(
        f"no hive-bash-daemon answers on {options.bash_socket} (No such file or directory): the agent's "
        "bash tools fail until one does; start one (hive-bash-daemon --state-dir "
    )
    assert warning.endswith("or run hive-agent with --with-bash-daemon")
    caplog.clear()
    with trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        await listener.bind(str(options.bash_socket))
        listener.listen(1)
        with caplog.at_level(logging.WARNING, logger="hive.agent"):
            await warn_without_bash_daemon(options)
    assert not caplog.records
