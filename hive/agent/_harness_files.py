"""What the harness writes to disk, as attrs types, and the one cattrs converter for them.

- ``<state>/queue``: the queue's journal, one record a line (``base``, ``add``, ``carried``,
  ``compact``, ``compacted``).
- ``<state>/turns.jsonl``: before each turn's stream-json lines, one ``{"type":"hive_start",...}``
  line saying what the turn carries (:class:`TurnStart`); after them, one ``{"type":"hive",...}``
  line saying what it carried and how it ended (:class:`TurnRecord`).
- ``<state>/session``: the session to resume (:class:`SessionFile`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hive._convert import DecodeError, strict_converter, structure
from hive._lines import json_line, load_json
from hive.agent._errors import HarnessError
from hive.agent._model import Item

# -- the queue's journal --------------------------------------------------------------------------


@attrs.frozen
class Base:
    """The first line of a rewritten journal: what the records it replaced left to remember."""

    next_seq: int
    seen: tuple[str, ...] = ()
    compact: tuple[str, ...] = ()
    """Who asked for the compaction still owed, if one is."""
    op: Literal["base"] = "base"


@attrs.frozen
class Added:
    """An admitted message, numbered: it is acknowledged to its sender once this line is written."""

    item: Item
    op: Literal["add"] = "add"


@attrs.frozen
class Carried:
    """A turn that carried these items has ended: they leave the queue."""

    seqs: tuple[int, ...]
    op: Literal["carried"] = "carried"


@attrs.frozen
class CompactRequested:
    """A compaction was asked for (``by`` the operator or the agent): it runs before the next turn."""

    by: str
    op: Literal["compact"] = "compact"


@attrs.frozen
class Compacted:
    """The compaction owed when it started has ended (done or failed): nothing is owed now."""

    op: Literal["compacted"] = "compacted"


Record = Base | Added | Carried | CompactRequested | Compacted
_RECORDS: dict[str, type[Record]] = {
    attrs.fields(record).op.default: record for record in (Base, Added, Carried, CompactRequested, Compacted)
}


# -- the turn log's own lines ---------------------------------------------------------------------


TurnKind = Literal["turn", "compact"]


@attrs.frozen
class TurnStart:
    """``{"type":"hive_start",...}``: one per turn (or compaction) in ``turns.jsonl``, before its
    stream, so that a reader shows what a turn carries before what the agent made of it. Its
    :class:`TurnRecord` repeats these fields (a reader of the ends alone needs nothing else)."""

    turn: int
    kind: TurnKind
    started: float
    carried: tuple[Item, ...] = ()
    requested_by: str | None = None
    type: Literal["hive_start"] = "hive_start"


Outcome = Literal["completed", "cancelled", "idle", "exited", "failed", "not started", "stopped"]


@attrs.frozen
class TurnRecord:
    """``{"type":"hive",...}``: one per turn (or compaction) in ``turns.jsonl``, after its stream."""

    turn: int
    kind: TurnKind
    started: float
    ended: float
    carried: tuple[Item, ...] = ()
    """The messages the turn carried, oldest first (none for a compaction), as the queue's
    journal writes them."""
    requested_by: str | None = None
    """Who asked for a compaction: ``operator`` or ``agent``."""
    outcome: Outcome = "completed"
    """The turn's stop reason, or ``failed`` (it ran and raised), ``not started`` (its messages
    wait for the next), ``stopped`` (the harness was stopped during it)."""
    delivered: bool = True
    """Whether the messages reached the agent (they leave the queue); false: they are carried again."""
    is_error: bool = False
    error: str | None = None
    """Whether the turn ended in an error, and what went wrong where the harness or the agent
    said."""
    session_id: str | None = None
    """The agent's session after the turn: the next turn continues it (``--resume`` for claude,
    ``session/load`` for an ACP agent)."""
    result: str | None = None
    """The turn's final text, as the agent gave it."""
    context_used: int | None = None
    context_size: int | None = None
    """Tokens of the context window in use after the turn, and the window's size, where the
    agent said."""
    tokens: dict[str, Any] = attrs.field(factory=dict)
    """The turn's token counts as the agent reported them (input, output, cache reads, ...)."""
    cost_usd: float = 0.0
    """What the turn cost, in USD: how much its session's cost grew over it (the agents report
    a session's cost so far, not a turn's; see `hive.sink.SessionCost`)."""
    session_cost_usd: float = 0.0
    """What the session (``session_id``) had cost after the turn, in USD, as the agent said: the
    sum of its turns' ``cost_usd``."""
    type: Literal["hive"] = "hive"


# -- the session to resume ------------------------------------------------------------------------


@attrs.frozen
class SessionFile:
    """``<state>/session.json``: the session a restarted harness resumes."""

    backend: str
    session_id: str
    cost_usd: float = 0.0
    """What the session had cost after its last turn, as the agent said: the next turn's cost is
    measured from it, after a restart too."""


converter = strict_converter()
converter.register_fields(Item, {"sender": "from"}, omit_if_default=("end_id", "traceparent", "shown_at"))


class RecordError(HarnessError, ValueError):
    """A line of the harness's files that is not a record it wrote."""


def encode(value: Record | TurnStart | TurnRecord | SessionFile) -> bytes:
    """One JSON line of the harness's files."""
    return json_line(converter.unstructure(value))


def decode_record(line: bytes) -> Record:
    """One line of the queue's journal; RecordError saying what is wrong if it is not a record."""

    def refused(why: str) -> RecordError:
        return RecordError(f"not a queue record ({why}): {line[:200]!r}")

    raw = load_json(line, refused)
    try:
        kind = _RECORDS[raw["op"]]
    except (KeyError, TypeError) as exc:
        raise refused(f"{type(exc).__name__}: {exc}") from None
    try:
        record: Record = structure(converter, raw, kind)
    except DecodeError as exc:
        raise refused(str(exc)) from None
    return record


def decode_turn_record(raw: dict[str, Any]) -> TurnRecord:
    """The turn log's own line (parsed); RecordError saying what is wrong if it is not one."""
    try:
        return structure(converter, raw, TurnRecord)
    except DecodeError as exc:
        raise RecordError(f"not a turn record ({exc})") from None


def decode_session(data: bytes) -> SessionFile:
    """The session file; RecordError saying what is wrong if it is not one."""

    def refused(why: str) -> RecordError:
        return RecordError(f"not a session file ({why})")

    try:
        return structure(converter, load_json(data, refused), SessionFile)
    except DecodeError as exc:
        raise refused(str(exc)) from None
