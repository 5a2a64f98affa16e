"""The one cattrs converter for the daemon's disk records (hive's strict one: no value is coerced)."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from hive._convert import DecodeError, strict_converter, structure
from hive.bash._errors import BashError
from hive.bash.files._records import LooseEnd, TaskRecord

T = TypeVar("T", TaskRecord, LooseEnd)

converter = strict_converter()


class RecordError(BashError, ValueError):
    """A file under the state directory does not hold a record of the expected shape."""


def encode(value: TaskRecord | LooseEnd) -> bytes:
    """The record as one compact JSON line."""
    return json.dumps(converter.unstructure(value), separators=(",", ":")).encode() + b"\n"


def decode(data: bytes, cls: type[T]) -> T:
    """The record in ``data``; RecordError saying which field is wrong if it is not one."""
    try:
        raw: Any = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"not a {cls.__name__}: not JSON ({str(exc)[:200]})") from None
    try:
        return structure(converter, raw, cls)
    except DecodeError as exc:
        raise RecordError(f"not a {cls.__name__}: {exc}") from None
