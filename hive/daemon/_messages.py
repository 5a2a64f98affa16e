"""One line a peer sent, read as a JSON-RPC message: parsed, never matched as text.

A line is one of: a :class:`Request` (owed an answer), a :class:`Notification`, a response
(the kit's server sends no requests, so it is dropped), a :class:`Misread` (JSON that is no
acceptable request, answered with an error, the session going on), or :class:`Garbage` (not a
JSON-RPC message at all: the server says so and ends the connection).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from hive.daemon.protocol import INVALID_PARAMS, INVALID_REQUEST, error_line

RequestId = str | int


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None


@attrs.frozen
class Notification:
    method: str
    params: dict[str, Any] | None


@attrs.frozen
class Response:
    """An answer the peer sent: none is expected, so it is dropped."""


@attrs.frozen
class Misread:
    """JSON that the server answers with ``answer`` and goes on."""

    answer: bytes


@attrs.frozen
class Garbage:
    """Not a JSON-RPC message; ``reason`` says why."""

    reason: str


Message = Request | Notification | Response | Misread | Garbage


def read_message(line: bytes) -> Message | None:
    """What ``line`` holds; None for a blank line (skipped)."""
    if not line.strip():
        return None
    raw = _object_of(line)
    if isinstance(raw, Garbage):
        return raw
    method = raw.get("method")
    if isinstance(method, str):
        return _call_of(raw, method)
    if "method" not in raw and "id" in raw and ("result" in raw or "error" in raw):
        return Response()
    return Garbage(
        'its "method" must be a string' if "method" in raw else 'it has neither a "method" nor an answer'
    )


def _object_of(line: bytes) -> dict[str, Any] | Garbage:
    """The JSON-RPC 2.0 object ``line`` holds, or why it holds none."""
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return Garbage(f"not JSON ({_first_line(exc)})")
    if isinstance(raw, list):
        return Garbage("a batch (a JSON array); send each message on a line of its own")
    if not isinstance(raw, dict):
        return Garbage("expected an object")
    if raw.get("jsonrpc") != "2.0":
        return Garbage('its "jsonrpc" must be "2.0"')
    return raw


def _call_of(raw: dict[str, Any], method: str) -> Message:
    """A request (it has an ``id``) or a notification, or the error that answers it."""
    request_id = raw.get("id")
    if "id" in raw and not _is_id(request_id):
        return Misread(_bad_id(request_id))
    if _holds_a_lone_surrogate(raw):
        return Misread(_not_text(request_id))
    params = raw.get("params")
    if params is not None and not isinstance(params, dict):
        if "id" not in raw:
            return Notification(method, None)
        return Misread(
            error_line(
                request_id, INVALID_PARAMS, "Invalid params: params must be an object; nothing was done"
            )
        )
    if "id" not in raw:
        return Notification(method, params)
    assert isinstance(request_id, str | int)
    return Request(request_id, method, params)


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _bad_id(request_id: object) -> bytes:
    shown = json.dumps(request_id)[:100]
    return error_line(
        None,
        INVALID_REQUEST,
        f"Invalid Request: id must be a string or an integer, not {shown}; nothing was done",
    )


def _holds_a_lone_surrogate(raw: object) -> bool:
    try:
        json.dumps(raw, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    return False


def _not_text(request_id: object) -> bytes:
    return error_line(
        request_id if _is_id(request_id) else None,
        INVALID_PARAMS,
        "Invalid params: a string in the message holds a lone surrogate escape (such as \\ud800), which is "
        "not Unicode text; send text that is valid UTF-8. Nothing was done",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__
