"""6. 100,000 stream-json lines from a (fake) claude through hive's claude runtime into a sink.

One stream is built once (init, ~1% assistant lines, a few tool calls and results, mostly
``content_block_delta`` stream events of 250-400 bytes, result last; from the shapes of
``fixtures/claude_samples/02``) and a fake claude writes it with one ``emit_raw`` (one big write).
Measured, side by side in each round:

- hive: ``open_claude_runtime`` with the fake as ``claude_command``, one turn into a sink that
  stamps ``perf_counter()`` at its first write and at each later one (the last holds the result);
  the same again into ``JsonlSink`` on a file, to show the cost of writing it out.
- floor: ``cat FILE`` through a pipe, read to EOF here with 1 MiB ``os.read`` calls (first byte to EOF).
- peer: the Claude Agent SDK's own reading of the same fake: its ``SubprocessCLITransport`` (anyio
  on asyncio, its text stream, its line framer and ``json.loads``) and ``parse_message`` on each
  line into a list, first message to the result. Its ``Query`` layer (control-message routing and
  a memory stream to the caller) is left out: it needs an ``initialize`` answer the fake cannot
  give, and it would only add to the SDK's time.
- producer check: the fake read like the floor, to show its writing is not the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import trio
from _common import Figure, main, scratch, summary

from hive.claude import open_claude_runtime
from hive.runtime import CompactionPolicy, Config, RuntimeSpec, StopReason
from hive.sink import Batch, ContextUsage, JsonlSink

REPO = Path(__file__).resolve().parent.parent
FAKE = REPO / "fixtures" / "fake_claude.py"
SAMPLE = REPO / "fixtures" / "claude_samples" / "02_tool_turn_with_partial_messages.jsonl"
LINES = 100_000
ROUNDS = 5
READ_SIZE = 1 << 20
PROSE = (
    "the function reads each chunk from the pipe and hands whole lines on; a test covers "
    "edge cases — naïve framing splits at every newline,"
)
WORDS = PROSE.split()


# -- the stream -----------------------------------------------------------------------------------


def build_stream(count: int) -> bytes:
    """``count`` lines: init, then API messages as claude streams them, the result last."""
    t = SAMPLE.read_text().splitlines()
    rng = random.Random(6)

    def line(template: str, **event: Any) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(template)
        obj["uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        obj.get("event", {}).update(event)
        return obj

    def text(size: int) -> str:
        words, length = [], 0
        while length < size:
            words.append(rng.choice(WORDS) + ("\n" if rng.random() < 0.03 else ""))
            length += len(words[-1]) + 1
        return " ".join(words)

    out = [json.loads(t[0])]
    while len(out) < count - 1:
        msg_id = f"msg_{rng.getrandbits(96):024x}"
        start = line(t[2])
        start["event"]["message"]["id"] = msg_id
        out += [line(t[1]), start, line(t[3], index=0)]
        pieces = [text(rng.randint(20, 150)) for _ in range(rng.randint(40, 160))]
        out += [line(t[4], delta={"type": "text_delta", "text": p}) for p in pieces]
        said = line(t[9])
        said["message"].update(id=msg_id, content=[{"type": "text", "text": "".join(pieces)}])
        out += [said, line(t[10], index=0)]
        if rng.random() < 0.3:
            tool = line(t[14])
            tool["message"]["id"] = msg_id
            out += [line(t[11]), *(line(t[12]) for _ in range(rng.randint(3, 10))), tool, line(t[15])]
            result = line(t[18])
            result["message"]["content"][0]["content"] = text(rng.randint(200, 4000))
            out += [line(t[16]), line(t[17]), result]
        else:
            out += [line(t[16]), line(t[17])]
    out = [*out[: count - 1], json.loads(t[30])]
    return b"".join(json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for o in out)


def install_fake(root: Path, stream: bytes) -> tuple[Path, dict[str, str]]:
    """An executable that runs the fake claude, and the environment that makes it print ``stream``."""
    wrapper = root / "claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    wrapper.chmod(0o755)
    script = root / "script.json"
    script.write_text(json.dumps({"turns": [[{"emit_raw": stream.decode()}]]}))
    return wrapper, {"FAKE_CLAUDE_SCRIPT": str(script), "FAKE_CLAUDE_MAX_SECONDS": "120"}


# -- the measurements -----------------------------------------------------------------------------


class StampSink:
    """Keeps the batches and notes when the first arrived and when the last was written."""

    def __init__(self, inner: JsonlSink | None = None) -> None:
        self.inner = inner
        self.batches: list[Batch] = []
        self.first = self.last = 0.0

    async def write(self, batch: Batch) -> None:
        now = time.perf_counter()
        if not self.batches:
            self.first = now
        self.batches.append(batch)
        if self.inner is not None:
            await self.inner.write(batch)
            now = time.perf_counter()
        self.last = now

    async def context_usage(self, usage: ContextUsage) -> None:
        pass


def hive(root: Path, wrapper: Path, env: dict[str, str], stream: bytes, out: Path | None = None) -> float:
    async def turn() -> StampSink:
        sink = StampSink(JsonlSink.to_path(out) if out else None)
        spec = RuntimeSpec(claude_command=str(wrapper))
        config = Config(cwd=root, env=tuple(env.items()), compaction=CompactionPolicy(watermark=None))
        async with open_claude_runtime(spec, config) as runtime:
            outcome = await runtime.run("go", sink)
        if sink.inner is not None:
            await sink.inner.aclose()
        if outcome.stop_reason is not StopReason.COMPLETED or outcome.synthesized:
            raise RuntimeError(f"the turn did not complete: {outcome}")
        return sink

    sink = trio.run(turn)
    written = out.read_bytes() if out else b"".join(b.data for b in sink.batches)
    if written != stream:
        raise RuntimeError(f"hive passed on {len(written)} bytes, not the {len(stream)} written")
    if out:
        out.unlink()
    return sink.last - sink.first


def read_pipe(argv: list[str], size: int, env: dict[str, str] | None = None) -> float:
    """Spawn ``argv`` with its stdout a pipe and read that to EOF: first byte to EOF."""
    env = {**os.environ, **env} if env else None
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env) as process:
        assert process.stdout is not None
        fd, first, total = process.stdout.fileno(), 0.0, 0
        while chunk := os.read(fd, READ_SIZE):
            if not total:
                first = time.perf_counter()
            total += len(chunk)
        took = time.perf_counter() - first
    if total != size or process.returncode:
        raise RuntimeError(f"{argv[0]}: {total} bytes of {size}, exit status {process.returncode}")
    return took


def sdk(root: Path, wrapper: Path, env: dict[str, str], count: int) -> float:
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage
    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

    async def turn() -> float:
        options = ClaudeAgentOptions(
            cli_path=str(wrapper), cwd=str(root), env=env, extra_args={"print": None}
        )
        transport = SubprocessCLITransport(prompt="go", options=options)
        await transport.connect()
        messages: list[Any] = []
        first = last = 0.0
        try:
            async with contextlib.aclosing(transport.read_messages()) as lines:
                async for data in lines:
                    message = parse_message(data)
                    if not messages:
                        first = time.perf_counter()
                    messages.append(message)
                    if isinstance(message, ResultMessage):
                        last = time.perf_counter()
                        break
        finally:
            await transport.close()
        if len(messages) != count:
            raise RuntimeError(f"the SDK parsed {len(messages)} messages, not {count}")
        return last - first

    return asyncio.run(turn())


def run() -> list[Figure]:
    try:
        import claude_agent_sdk  # noqa: F401
    except ImportError:
        raise RuntimeError("the peer is missing: .venv/bin/pip install -e '.[test,bench]'") from None
    stream = build_stream(LINES)
    samples: dict[str, list[float]] = {"hive": [], "hive_jsonl": [], "cat": [], "sdk": [], "fake_raw": []}
    with scratch() as root:
        wrapper, env = install_fake(root, stream)
        path = root / "stream.jsonl"
        path.write_bytes(stream)
        fake_argv = [str(wrapper), "--print", "--output-format", "stream-json", "--verbose", "--", "go"]
        measure = {
            "hive": lambda: hive(root, wrapper, env, stream),
            "cat": lambda: read_pipe(["cat", str(path)], len(stream)),
            "sdk": lambda: sdk(root, wrapper, env, LINES),
            "hive_jsonl": lambda: hive(root, wrapper, env, stream, root / "out.jsonl"),
            "fake_raw": lambda: read_pipe(fake_argv, len(stream), env),
        }
        for round_ in range(ROUNDS + 1):  # the first round warms up and is not counted
            for name, once in measure.items():
                gc.collect()
                took = once()
                if round_:
                    samples[name].append(took * 1000)
    med = {name: summary(values)["median"] for name, values in samples.items()}
    about = f"{LINES:,} lines, {len(stream) / 1e6:.1f} MB"
    extra = {"lines": LINES, "bytes": len(stream), "samples_ms": samples}
    return [
        Figure("6 passthrough", f"hive: fake claude → runtime → sink, {about}", med["hive"], "ms",
               med["cat"], "cat FILE, read to EOF", "<= 3x", extra),
        Figure("6 passthrough", "hive (as above) / the Agent SDK's transport + parse_message", med["hive"],
               "ms", med["sdk"], "SDK", "<= 1x"),
        Figure("6 passthrough", "hive into JsonlSink on a file", med["hive_jsonl"], "ms",
               med["cat"], "cat FILE, read to EOF"),
        Figure("6 passthrough", "producer check: the fake claude read like cat", med["fake_raw"], "ms",
               med["cat"], "cat FILE, read to EOF"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
