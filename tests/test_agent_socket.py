"""The harness's agent socket under bad input: whatever a client sends, a malformed or unknown
request gets ``{"ok":false,"error":...}``, the connection stays usable, and nothing but a
well-formed wake or prompt is queued."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import trio
from hypothesis import given, settings

from hive.agent_socket import Prompt, Status, Wake, decode_request, encode, serve_agent_socket
from tests.helpers.agent_loop import ScriptedRuntime, raw_client, serving
from tests.helpers.strategies import agent_lines


@settings(max_examples=60)
@given(lines=agent_lines)
def test_bad_requests_are_refused_and_the_connection_stays_usable(lines: list[bytes]) -> None:
    root = Path(tempfile.mkdtemp(prefix="hive-as-", dir="/tmp"))
    try:
        trio.run(_exchange, root, lines)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _exchange(root: Path, lines: list[bytes]) -> None:
    runtime = ScriptedRuntime()
    path = root / "agent.sock"
    with trio.fail_after(30):
        async with serving(root, runtime) as harness, trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, path, harness.handle)
            async with raw_client(path) as client:
                queued = 0
                ends: set[str] = set()
                for line in lines:
                    if not line.strip():
                        continue
                    answer = await client.ask(line + b"\n")
                    assert answer is not None, "the harness hung up"
                    assert isinstance(answer["ok"], bool)
                    expected = _accepted(line, ends)
                    if expected is None:
                        assert answer["ok"] is False and answer["error"], answer
                    else:
                        assert answer["ok"] is True, answer
                        queued += expected
                # Still usable: a good request after all of it is answered.
                status = await client.ask(encode(Status()))
                assert status is not None and status["ok"] is True
                assert status["status"]["queue"] + status["status"]["carrying"] == queued
            nursery.cancel_scope.cancel()


def _accepted(line: bytes, ends: set[str]) -> int | None:
    """None if the line is to be refused; else how many messages it queues (a repeat of an end
    already sent is acknowledged and dropped)."""
    try:
        request = decode_request(line)
    except ValueError:
        return None
    if isinstance(request, Prompt) and not request.text.strip():
        return None  # nothing to say: refused
    if isinstance(request, Wake) and request.end_id is not None:
        if request.end_id in ends:
            return 0
        ends.add(request.end_id)
    return 1 if request.type in ("wake", "prompt") else 0


def test_a_status_answer_is_the_harness_status_shape() -> None:
    async def main(root: Path) -> dict[str, Any]:
        async with serving(root, ScriptedRuntime()) as harness, trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, root / "agent.sock", harness.handle)
            async with raw_client(root / "agent.sock") as client:
                answer = await client.ask(b'{"type":"status"}\n')
            nursery.cancel_scope.cancel()
        assert answer is not None
        return answer

    root = Path(tempfile.mkdtemp(prefix="hive-as-", dir="/tmp"))
    try:
        answer = trio.run(main, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert answer["ok"] is True
    assert answer["status"]["state"] == "idle"
    assert answer["status"]["queue"] == 0


def test_an_empty_or_blank_prompt_is_refused_over_the_socket_and_nothing_is_queued() -> None:
    async def main(root: Path) -> list[dict[str, Any] | None]:
        async with serving(root, ScriptedRuntime()) as harness, trio.open_nursery() as nursery:
            await nursery.start(serve_agent_socket, root / "agent.sock", harness.handle)
            async with raw_client(root / "agent.sock") as client:
                answers = [
                    await client.ask(line)
                    for line in (b'{"type":"prompt","text":""}\n', b'{"type":"prompt","text":" \\n\\t"}\n')
                ]
                answers.append(await client.ask(b'{"type":"status"}\n'))
            nursery.cancel_scope.cancel()
        return answers

    root = Path(tempfile.mkdtemp(prefix="hive-as-", dir="/tmp"))
    try:
        *refused, status = trio.run(main, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for answer in refused:
        assert answer is not None and answer["ok"] is False
        assert "the prompt is empty (or only blanks): nothing was queued" in answer["error"]
    assert status is not None and status["status"]["queue"] == 0
