"""The package's one cattrs converter: records on disk and lines on the daemon's socket."""

from __future__ import annotations

from typing import Any, TypeVar

import cattrs
from cattrs.preconf.json import make_converter

from hive.subagent._errors import SubagentError

T = TypeVar("T")

converter = make_converter(forbid_extra_keys=False)


def _strict(kind: type[T]) -> Any:
    def structure(value: Any, _: Any) -> T:
        # cattrs would coerce (12 -> "12", "no" -> True); a value of the wrong type is refused.
        if type(value) is not kind and not (kind is float and type(value) is int):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r:.40}")
        return value  # type: ignore[return-value]

    return structure


for _kind in (str, bool, int, float):
    converter.register_structure_hook(_kind, _strict(_kind))


class DecodeError(SubagentError, ValueError):
    """A record or a line is not what it should be; the message says what is wrong."""


def structure(raw: Any, kind: type[T]) -> T:
    try:
        return converter.structure(raw, kind)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        detail = (
            "; ".join(cattrs.transform_error(exc)) if isinstance(exc, cattrs.BaseValidationError) else exc
        )
        raise DecodeError(f"malformed {kind.__name__}: {detail}") from None


def unstructure(value: Any) -> Any:
    return converter.unstructure(value)
