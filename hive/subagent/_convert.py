"""The package's one cattrs converter (hive's strict one): records on disk and lines on the daemon's socket."""

from __future__ import annotations

from typing import Any, TypeVar

from hive._convert import DecodeError, strict_converter
from hive._convert import structure as _structure

__all__ = ["DecodeError", "converter", "structure", "unstructure"]


T = TypeVar("T")

converter = strict_converter()


def structure(raw: Any, kind: type[T]) -> T:
    """``raw`` as ``kind``; :class:`DecodeError` naming each wrong field if it is not one."""
    return _structure(converter, raw, kind)


def unstructure(value: Any) -> Any:
    """``value`` as JSON-ready data."""
    return converter.unstructure(value)
