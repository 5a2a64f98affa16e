"""The real-peer tier works: the pinned claude binary runs turns offline against the fake API.

No hive code here: the CLI is run directly, and the fake's own behaviour is checked over HTTP.
"""

from __future__ import annotations

import http.client
import json
import signal
from pathlib import Path
from typing import Any

import trio

from fixtures.fake_api_control import FakeApi

TURN_TIMEOUT = 60


async def _interrupt(process: trio.Process) -> None:
    """Cancellation stops the CLI the way hive does: SIGINT, never SIGTERM/SIGKILL."""
    process.send_signal(signal.SIGINT)
    await process.wait()


async def run_claude(
    claude: Path, env: dict[str, str], cwd: Path, *args: str
) -> tuple[int, list[dict[str, Any]], str]:
    """One ``claude -p`` run: exit status, the stream-json lines, stderr."""
    argv = [str(claude), *args, "--output-format", "stream-json", "--verbose"]
    with trio.fail_after(TURN_TIMEOUT):
        done = await trio.run_process(
            argv,
            env=env,
            cwd=cwd,
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            deliver_cancel=_interrupt,
        )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr.decode(errors="replace")


async def test_text_turn(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario({"mode": "text", "text": "Hello from the smoke test."})

    code, lines, stderr = await run_claude(real_claude, claude_env, claude_workdir, "-p", "say hello")

    assert code == 0, stderr
    init = next(line for line in lines if line["type"] == "system" and line.get("subtype") == "init")
    assert init["session_id"]
    assert init["cwd"] == str(claude_workdir)
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert init["claude_code_version"]
    assert lines[-1]["type"] == "result", lines[-1]
    result = lines[-1]
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "Hello from the smoke test."
    assert result["session_id"] == init["session_id"]

    main = fake_api.requests(kind="main")
    assert len(main) == 1, fake_api.requests()
    assert main[0]["path"] == "/v1/messages"
    assert main[0]["stream"] is True
    assert main[0]["prompt"] == "say hello"
    assert "Bash" in main[0]["tools"]
    assert main[0]["system_len"] > 0


async def test_bash_tool_turn(
    real_claude: Path, fake_api: FakeApi, claude_env: dict[str, str], claude_workdir: Path
) -> None:
    fake_api.set_scenario(
        {"mode": "bash", "command": "echo tool-ran-here", "after_tool_text": "Done with it."}
    )

    code, lines, stderr = await run_claude(
        real_claude, claude_env, claude_workdir, "-p", "run the command", "--allowedTools", "Bash(echo *)"
    )

    assert code == 0, stderr
    tool_results = [
        block
        for line in lines
        if line["type"] == "user" and isinstance(line["message"]["content"], list)
        for block in line["message"]["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(tool_results) == 1
    assert "tool-ran-here" in str(tool_results[0]["content"])
    assert lines[-1]["type"] == "result"
    assert lines[-1]["result"] == "Done with it."
    assert lines[-1]["num_turns"] == 2

    main = fake_api.requests(kind="main")
    assert [r["step"] for r in main] == [0, 1]
    assert main[1]["tool_results"][0]["is_error"] is False
    assert "tool-ran-here" in main[1]["tool_results"][0]["text"]


def _post(port: int, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        connection.close()


async def test_fake_api_answers_without_the_cli(fake_api: FakeApi) -> None:
    """The fake on its own (runs even where the real CLI is not installed)."""
    fake_api.set_scenario(
        {
            "mode": "tool",
            "tool": "mcp__bash__run",
            "input": {"command": "ls"},
            "usage": {"input_tokens": 9000},
        }
    )
    request = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": [{"name": "Bash"}]}

    status, kind, body = await trio.to_thread.run_sync(
        _post, fake_api.port, "/v1/messages?beta=true", request
    )
    assert (status, kind) == (200, "application/json")
    answer = json.loads(body)
    assert answer["stop_reason"] == "tool_use"
    assert answer["content"][-1]["name"] == "mcp__bash__run"
    assert answer["content"][-1]["input"] == {"command": "ls"}
    assert answer["usage"]["input_tokens"] == 9000

    status, kind, body = await trio.to_thread.run_sync(
        _post, fake_api.port, "/v1/messages", {**request, "stream": True}
    )
    assert (status, kind) == (200, "text/event-stream")
    events = [
        line.removeprefix("event: ") for line in body.decode().splitlines() if line.startswith("event: ")
    ]
    assert events[0] == "message_start"
    assert events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == 2

    compact = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": "Create a detailed summary of the conversation so far, in <summary> tags.",
            }
        ],
    }
    status, _, body = await trio.to_thread.run_sync(_post, fake_api.port, "/v1/messages", compact)
    assert json.loads(body)["content"][0]["text"].startswith("<summary>")

    status, _, body = await trio.to_thread.run_sync(
        _post, fake_api.port, "/v1/messages/count_tokens", request
    )
    assert status == 200
    assert json.loads(body)["input_tokens"] > 0

    fake_api.set_scenario({"mode": "error400"})
    status, _, body = await trio.to_thread.run_sync(_post, fake_api.port, "/v1/messages", request)
    assert status == 400
    assert json.loads(body)["type"] == "error"

    assert [r["kind"] for r in fake_api.requests()] == ["main", "main", "compact", "count_tokens", "main"]
    assert fake_api.requests()[0]["query"] == {"beta": "true"}
