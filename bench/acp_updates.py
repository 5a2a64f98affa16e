"""7. 100,000 ``agent_message_chunk`` updates in one ACP turn: hive's client against the ACP SDK's.

One stream is built once: a ``usage_update``, then 100,000 ``agent_message_chunk``s (1-6 words
each, a new ``messageId`` every 100-1,000 chunks, as an agent streams one API message after
another), for session ``sess_bench``. ``acp_producer.py`` (standard library only) answers
``initialize`` and ``session/new`` and, on ``session/prompt``, writes the stream in 1 MiB writes
and then the prompt's answer. Measured, side by side in each round:

- hive: ``open_acp_runtime`` with the producer as the agent, one ``run`` into a sink that stamps
  ``perf_counter()`` at its first ``context_usage`` (the first update, the ``usage_update``) and
  at every write (the last holds the turn's ``result``). Then the assistant blocks are checked
  against the chunks.
- peer: the official ACP Python SDK's client (``acp.spawn_agent_process`` and the
  ``ClientSideConnection`` it gives, asyncio + pydantic) with a ``Client`` whose
  ``session_update`` keeps every update: first ``session_update`` call to ``prompt()`` returning
  (the SDK's ``prompt`` waits for the updates still being handled). Then the updates are checked.
- producer check: the producer driven by hand, its output read with 1 MiB ``os.read`` calls from
  a pipe widened as hive widens it: first read after the prompt to the answer's arrival.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import acp_producer
import trio
from _acp import StampSink, line
from _common import PYTHON, Figure, main, scratch, summary

from hive.acp import open_acp_runtime
from hive.runtime import Backend, CompactionPolicy, Config, RuntimeSpec, StopReason

PRODUCER = str(Path(__file__).resolve().with_name("acp_producer.py"))
CHUNKS = 100_000
ROUNDS = 5
READ_SIZE = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PROSE = (
    "the function reads each chunk from the pipe and hands whole lines on; a test covers edge "
    "cases — naïve framing splits at every newline,"
)
WORDS = PROSE.split()


def build_stream(count: int) -> tuple[bytes, list[str]]:
    """The update lines, and the text of each message the chunks make up."""
    rng = random.Random(7)

    def update(body: dict[str, Any]) -> bytes:
        params = {"sessionId": acp_producer.SESSION, "update": body}
        message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"

    lines = [update({"sessionUpdate": "usage_update", "used": 1000, "size": 200000})]
    texts: list[str] = []
    while (sent := len(lines) - 1) < count:
        message_id = f"msg_{rng.getrandbits(96):024x}"
        pieces = []
        for _ in range(min(rng.randint(100, 1000), count - sent)):
            words = [
                rng.choice(WORDS) + ("\n" if rng.random() < 0.03 else "") for _ in range(rng.randint(1, 6))
            ]
            pieces.append(" " + " ".join(words))
            chunk = {"type": "text", "text": pieces[-1]}
            lines.append(
                update({"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": chunk})
            )
        texts.append("".join(pieces))
    return b"".join(lines), texts


# -- the measurements -----------------------------------------------------------------------------


def hive(root: Path, stream_path: Path, texts: list[str]) -> float:
    async def turn() -> StampSink:
        sink = StampSink()
        spec = RuntimeSpec(backend=Backend.ACP, command=PYTHON, args=(PRODUCER, str(stream_path)))
        config = Config(cwd=root, compaction=CompactionPolicy(watermark=None))
        async with open_acp_runtime(spec, config) as runtime:
            outcome = await runtime.run("go", sink)
        if outcome.stop_reason is not StopReason.COMPLETED or outcome.is_error:
            raise RuntimeError(f"the turn did not complete: {outcome}")
        return sink

    sink = trio.run(turn)
    messages = sink.messages()
    said = [m["message"]["content"][0]["text"] for m in messages if m["type"] == "assistant"]
    if said != texts or messages[-1]["type"] != "result" or sink.usage_at is None:
        raise RuntimeError(f"hive wrote {len(said)} assistant blocks, not the {len(texts)} sent")
    return sink.last_write - sink.usage_at


def sdk(root: Path, stream_path: Path, texts: list[str]) -> float:
    import acp

    class Collector:
        def __init__(self) -> None:
            self.updates: list[Any] = []
            self.first = 0.0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            if not self.updates:
                self.first = time.perf_counter()
            self.updates.append(update)

    async def turn() -> tuple[Collector, float]:
        client = Collector()
        async with acp.spawn_agent_process(client, PYTHON, PRODUCER, str(stream_path), cwd=root) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            answer = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
            done = time.perf_counter()
        if answer.stop_reason != "end_turn":
            raise RuntimeError(f"the SDK's prompt ended with {answer.stop_reason}")
        return client, done

    client, done = asyncio.run(turn())
    by_message: dict[str, list[str]] = {}
    for update in client.updates[1:]:
        by_message.setdefault(update.message_id, []).append(update.content.text)
    if len(client.updates) != CHUNKS + 1 or ["".join(p) for p in by_message.values()] != texts:
        raise RuntimeError(f"the SDK's client got {len(client.updates)} updates, not {CHUNKS + 1}")
    return done - client.first


def producer_raw(root: Path, stream_path: Path, size: int) -> float:
    """The producer's own speed: its output read to the prompt's answer as fast as a pipe allows."""
    process = subprocess.Popen(
        [PYTHON, PRODUCER, str(stream_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root
    )
    assert process.stdin is not None and process.stdout is not None
    fd = process.stdout.fileno()
    fcntl.fcntl(fd, F_SETPIPE_SZ, READ_SIZE)  # as hive widens an agent's stdout
    requests = [("initialize", {"protocolVersion": 1}), ("session/new", {"cwd": str(root), "mcpServers": []})]
    for request_id, (method, params) in enumerate(requests):
        process.stdin.write(line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        process.stdin.flush()
        while not os.read(fd, READ_SIZE).endswith(b"\n"):
            pass
    prompt = {"sessionId": acp_producer.SESSION, "prompt": [{"type": "text", "text": "go"}]}
    process.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}))
    process.stdin.flush()
    expected = size + len(acp_producer.answer(2, {"stopReason": "end_turn"}))
    total, first = 0, 0.0
    while total < expected and (chunk := os.read(fd, READ_SIZE)):
        if not total:
            first = time.perf_counter()
        total += len(chunk)
    took = time.perf_counter() - first
    process.stdin.close()
    process.wait(10)
    process.stdout.close()
    if total != expected:
        raise RuntimeError(f"the producer wrote {total} bytes, not {expected}")
    return took


def run() -> list[Figure]:
    try:
        import acp  # noqa: F401
    except ImportError:
        raise RuntimeError("the peer is missing: .venv/bin/pip install -e '.[test,bench]'") from None
    stream, texts = build_stream(CHUNKS)
    samples: dict[str, list[float]] = {"hive": [], "sdk": [], "producer": []}
    with scratch() as root:
        stream_path = root / "updates.jsonl"
        stream_path.write_bytes(stream)
        measure = {
            "hive": lambda: hive(root, stream_path, texts),
            "sdk": lambda: sdk(root, stream_path, texts),
            "producer": lambda: producer_raw(root, stream_path, len(stream)),
        }
        for round_ in range(ROUNDS + 1):  # the first round warms up and is not counted
            for name, once in measure.items():
                gc.collect()
                took = once()
                if round_:
                    samples[name].append(took * 1000)
    med = {name: summary(values)["median"] for name, values in samples.items()}
    about = f"{CHUNKS:,} chunks, {len(stream) / 1e6:.1f} MB, {len(texts)} messages"
    extra = {"chunks": CHUNKS, "bytes": len(stream), "messages": len(texts), "samples_ms": samples}
    return [
        Figure("7 acp updates", f"hive: first update → result in the sink, {about}", med["hive"], "ms",
               med["sdk"], "ACP SDK client: first update → prompt answered", "<= 1x", extra),
        Figure("7 acp updates", "producer check: its output read raw / hive", med["producer"], "ms",
               med["hive"], "hive"),
    ]  # fmt: skip


if __name__ == "__main__":
    main(run)
