"""The turn log, ``<state>/turns.jsonl``: for each turn, one ``{"type":"hive_start",...}`` line
(:class:`hive.agent._harness_files.TurnStart`), its stream-json as the Sink receives it, then one
``{"type":"hive",...}`` line (:class:`hive.agent._harness_files.TurnRecord`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

import attrs
import trio

from hive._files import read_tail
from hive.agent._harness_files import RecordError, TurnRecord, TurnStart, decode_turn_record, encode
from hive.agent._room import write_when_room
from hive.sink import (
    Batch,
    ContextUsage,
    JsonlFile,
    ResultMessage,
    SessionCost,
    SystemInit,
    TurnCost,
    first_message,
    structured,
    typed_lines,
)

log = logging.getLogger(__name__)

TAIL = 4 << 20
"""How much of the log's end is searched for the last turn's number and end."""


@attrs.frozen
class LogTail:
    """What a restarted harness takes over from the turn log."""

    turns: int = 0
    """The number of the last turn (or compaction) started, less one where that turn did not
    start: the next is numbered on from it."""
    last: TurnRecord | None = None
    """The end of the last turn (or compaction) that ended."""


@attrs.define(eq=False)
class TurnLog:
    """Appends to the turn log, each write whole or not at all (a full disk cuts no line in two)."""

    path: Path
    _file: JsonlFile
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    @classmethod
    def open(cls, path: Path) -> TurnLog:
        """The turn log at ``path``, opened to append (created 0600 if missing)."""
        return cls(path, JsonlFile.open(path, known_as="the turn log", meanwhile="turns go on unlogged"))

    @staticmethod
    def read_tail(path: Path) -> LogTail:
        """The last turn started and the last ended in the log at ``path`` (none if it has none)."""
        tail, _ = read_tail(path, TAIL)
        turns: int | None = None
        # Read back from the end: the last turn's lines are its stream at most (one that never ended).
        for line in reversed(tail.split(b"\n")):
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(obj, dict) or obj.get("type") not in ("hive", "hive_start"):
                continue
            if turns is None and isinstance(obj.get("turn"), int):
                turns = obj["turn"]
            if obj["type"] == "hive":
                try:
                    last = decode_turn_record(obj)
                except RecordError as exc:
                    log.warning("the turn log %s ends in a turn record hive cannot read: %s", path, exc)
                    return LogTail(turns or 0)
                turns = max(turns or 0, last.turn)
                if last.outcome == "not started" and turns == last.turn:
                    turns -= 1  # its retry takes its number, as it would have without the restart
                return LogTail(turns, last)
        return LogTail(turns or 0)

    async def write(self, data: bytes) -> None:
        """Append ``data``; a log that cannot be written is reported once and the turn goes on."""
        async with self._lock:
            await self._file.write_bytes(data)

    async def record(self, record: TurnStart | TurnRecord) -> None:
        """Append a turn's start or end line. An end is not dropped for a full disk: it waits
        for room (as long as the caller lets it), and is made durable before this returns."""
        data = encode(record)
        async with self._lock:
            if isinstance(record, TurnStart):
                await self._file.write_bytes(data)
                return
            waited: list[OSError] = []
            try:
                await write_when_room(
                    self.path.parent, partial(self._file.append, data), partial(self._full, record, waited)
                )
            except OSError as exc:
                self._file.refused(exc)
                return
            if waited:
                log.warning(
                    "turn %d's end is in the turn log %s: its disk had room again", record.turn, self.path
                )
            await self._file.sync()

    def _full(self, record: TurnRecord, waited: list[OSError], exc: OSError) -> None:
        waited.append(exc)
        log.error(
            "the disk of the turn log %s is full (%s): turn %d's end waits for room to be written; "
            "free space there",
            self.path,
            exc.strerror,
            record.turn,
        )

    def turn_sink(self, on_usage: Callable[[ContextUsage], None], cost: SessionCost) -> TurnSink:
        """A sink for one turn's stream into this log; ``on_usage`` is told each context usage,
        and ``cost`` is the session's cost before the turn (its results are measured from it)."""
        return TurnSink(self, on_usage, TurnCost(cost))

    async def aclose(self) -> None:
        """Close the log's file (once no write or sync is under way)."""
        async with self._lock:
            await self._file.aclose()


@attrs.define(eq=False)
class TurnSink:
    """The Sink of one turn: its lines go to the log as they come; what the harness must know
    of the turn (whether its result came, its context usage, its cost) is kept."""

    log: TurnLog
    on_usage: Callable[[ContextUsage], None]
    cost: TurnCost
    """What the turn's results say it cost, and the session's cost after them."""
    saw_result: bool = False
    """Whether the agent's own ``result`` line came: then it started and ended. One that hive
    made for an agent that ended without one does not count: such a turn has no result."""
    usage: ContextUsage | None = None
    session_id: str | None = None
    """The session the stream's init names (a turn stopped early may leave the runtime none)."""
    lines: int = 0

    async def write(self, batch: Batch) -> None:
        self.lines += len(batch)
        if self.session_id is None:
            init = first_message(batch, b'"init"', "system/init")
            if init is not None and isinstance(init[1], SystemInit):
                self.session_id = init[1].session_id
        for _, _, obj in typed_lines(batch, {"result": b'"result"'}):
            result = structured(obj)
            if isinstance(result, ResultMessage):
                self.saw_result = self.saw_result or not result.synthesized
                self.cost.result(result.session_id, result.total_cost_usd)
        await self.log.write(batch.data)

    async def context_usage(self, usage: ContextUsage) -> None:
        self.usage = usage
        self.on_usage(usage)
