"""A fast ACP agent for benchmark 7: standard library only, one stream of updates per prompt.

``python acp_producer.py STREAM``: STREAM is a file of ready-made ``session/update`` lines for
session ``sess_bench``. The agent answers ``initialize`` (protocol 1, MCP over HTTP) and
``session/new`` (``sess_bench``); on ``session/prompt`` it writes the whole file to stdout in
1 MiB writes and then the prompt's answer (``end_turn``). Other requests get -32601;
notifications (``session/cancel``) are ignored. It exits at stdin EOF.
"""

from __future__ import annotations

import json
import os
import sys

SESSION = "sess_bench"
WRITE_SIZE = 1 << 20
INITIALIZED = {
    "protocolVersion": 1,
    "agentCapabilities": {"loadSession": False, "mcpCapabilities": {"http": True, "sse": False}},
    "agentInfo": {"name": "bench-producer", "version": "1"},
    "authMethods": [],
}


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view[:WRITE_SIZE]) :]


def answer(request_id: object, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        stream = f.read()
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:
            continue
        if method == "initialize":
            write_all(answer(request_id, INITIALIZED))
        elif method == "session/new":
            write_all(answer(request_id, {"sessionId": SESSION}))
        elif method == "session/prompt":
            write_all(stream)
            write_all(answer(request_id, {"stopReason": "end_turn"}))
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            write_all(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")


if __name__ == "__main__":
    main()
