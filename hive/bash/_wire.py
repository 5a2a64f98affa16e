"""The one cattrs converter for the daemon's disk records."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import make_converter

from hive.bash._errors import BashError
from hive.bash._records import LooseEnd, TaskRecord

T = TypeVar("T", TaskRecord, LooseEnd)

converter = make_converter()


class RecordError(BashError, ValueError):
    """A file under the state directory does not hold a record of the expected shape."""


def encode(value: TaskRecord | LooseEnd) -> bytes:
    """``value`` as the one JSON line its file holds."""
    return json.dumps(converter.unstructure(value), separators=(",", ":")).encode() + b"\n"


def decode(data: bytes, cls: type[T]) -> T:
    """The record of type ``cls`` (a task record or a loose end) that ``data`` holds; RecordError
    if it holds none."""
    try:
        raw: Any = json.loads(data)
        return converter.structure(raw, cls)
    except (ValueError, TypeError, cattrs.BaseValidationError) as exc:
        raise RecordError(f"not a {cls.__name__}: {exc}") from None
