"""The queue's file, ``<state>/queue``: a journal the harness appends to and replays at start.

Each admitted message is appended as an ``add`` record and the file is synced before the
message is acknowledged; a turn's end appends a ``carried`` record for its messages (and the
wakes shown inline in it, see ``hive.agent._model``; a restart replays one it did not carry away
as an ordinary wake). So what a
restart replays is exactly what was acknowledged and not yet carried by a turn that ended. A
request to compact is a ``compact`` record, written before it is acknowledged, and the end of
the compaction that served it a ``compacted`` one: a restart runs a compaction still owed.
The harness writes whatever arrived while the last write was under way in one append, with
one ``fdatasync`` for all of it (a burst of wakes costs a few syncs, not one each). The
writes run in a worker thread, never on the event loop.

A harness killed in the middle of a write leaves at most a last line without its newline: it
was never acknowledged, and it is cut off when the file is next opened. The journal is
rewritten (temp file, sync, rename) as a ``base`` record (with the compaction still owed) and
the messages still queued when it has grown to twice its size after the last rewrite.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio

from hive._files import NotARegularFile, fsync_dir, open_append, read_regular, write_all, write_atomic
from hive.agent._errors import HarnessError
from hive.agent._harness_files import (
    Added,
    Base,
    Carried,
    Compacted,
    CompactRequested,
    Record,
    RecordError,
    TurnRecord,
    decode_record,
    encode,
)
from hive.agent._model import SEEN_LIMIT, Item, LoopState, owed_compaction

log = logging.getLogger(__name__)

REWRITE_FLOOR = 64 * 1024
"""A journal smaller than this is never rewritten."""


class QueueUnreadable(HarnessError, OSError):
    """The journal cannot be read: something other than a regular file is at its path (a
    symlink, a FIFO, a directory), or it may not be read."""


def replay(records: Iterable[Record]) -> LoopState:
    """The state a harness starts in, from its journal's records (pure)."""
    queued: dict[int, Item] = {}
    seen: list[str] = []
    compact: list[str] = []
    written = 0
    for record in records:
        match record:
            case Base(next_seq, ends, owed):
                queued.clear()
                seen = list(ends)
                compact = list(owed)
                written = max(written, next_seq - 1)
            case Added(item):
                queued[item.seq] = item
                written = max(written, item.seq)
            case Carried(seqs):
                for seq in seqs:
                    if seq in queued and (end := queued.pop(seq).end_id) is not None:
                        seen.append(end)
            case CompactRequested(by):
                if by not in compact:
                    compact.append(by)
            case Compacted():
                compact.clear()
    return LoopState(
        next_seq=written + 1,
        written_seq=written,
        # A turn that was running when the harness stopped did not deliver what it showed.
        queued=tuple(attrs.evolve(i, shown_at=None) for i in sorted(queued.values(), key=lambda i: i.seq)),
        compact=tuple(compact),
        seen=tuple(seen[-SEEN_LIMIT:]),
    )


@attrs.define(eq=False)
class QueueFile:
    """The journal, open for appending. Use :func:`open_queue_file` to get one."""

    path: Path
    _fd: int
    _size: int
    _rewritten_size: int = 0
    _lock: trio.Lock = attrs.field(factory=trio.Lock)
    syncs: int = 0
    """How many times the file was synced."""

    async def append(self, records: Iterable[Record]) -> None:
        """Append ``records`` and return once they are on disk (OSError if they could not be).
        The write runs to its end even if the caller is cancelled meanwhile."""
        data = b"".join(encode(r) for r in records)
        async with self._lock:
            try:
                await trio.to_thread.run_sync(self._write, data)
            except OSError as exc:
                raise OSError(exc.errno, f"could not write the queue {self.path}: {exc.strerror}") from None

    def _write(self, data: bytes) -> None:
        try:
            write_all(self._fd, data)
            os.fdatasync(self._fd)
        except OSError:
            # What went out of a failed write must not become the start of the next line.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        self.syncs += 1

    def wants_rewrite(self) -> bool:
        return self._size > max(REWRITE_FLOOR, 2 * self._rewritten_size)

    async def rewrite(self) -> None:
        """Replace the journal by the shortest one that replays to the same state: what it holds
        once the writes under way are done, read back from the file itself (never from the
        harness's state, which may not have taken in a write that just ended)."""
        async with self._lock:
            fd, size = await trio.to_thread.run_sync(_rewrite, self.path)
            os.close(self._fd)
            self._fd, self._size, self._rewritten_size = fd, size, size

    def close(self) -> None:
        os.close(self._fd)


def shortest(state: LoopState) -> list[Record]:
    """The fewest records that replay to ``state``'s queue, remembered ends and owed compaction."""
    base = Base(next_seq=state.written_seq + 1, seen=state.seen, compact=owed_compaction(state))
    return [base, *(Added(item) for item in state.queued)]


def _rewrite(path: Path) -> tuple[int, int]:
    records, _ = load(path)
    data = b"".join(encode(r) for r in shortest(replay(records)))
    return _replace(path, data), len(data)


def _replace(path: Path, data: bytes) -> int:
    write_atomic(path, data)
    fsync_dir(path.parent)
    return open_append(path)


def load(path: Path) -> tuple[list[Record], int]:
    """The journal's records, and the length of its whole lines. A last line without its
    newline (a write cut short by a crash) is left out; a line that is not a record (the file
    damaged) is skipped with a warning. A journal that cannot be read is `QueueUnreadable`."""
    try:
        data = read_regular(path)
    except OSError as exc:
        reason = "it is not a regular file" if isinstance(exc, NotARegularFile) else exc.strerror or str(exc)
        raise QueueUnreadable(
            f"cannot read the queue {path}: {reason}; move it away to start empty"
        ) from None
    if data is None:
        return [], 0
    whole = data.rfind(b"\n") + 1
    records: list[Record] = []
    for number, line in enumerate(data[:whole].split(b"\n")[:-1], 1):
        if not line.strip():
            continue
        try:
            records.append(decode_record(line))
        except RecordError as exc:
            log.warning("%s line %d skipped: %s", path, number, exc)
    return records, whole


def queued_messages(path: Path) -> int:
    """How many messages the journal at ``path`` holds for a turn, read as a restarted harness
    would read it (blocking; an unreadable journal is an `OSError`)."""
    records, _ = load(path)
    return replay(records).waiting()


def carried_by(state: LoopState, last: TurnRecord | None) -> tuple[int, ...]:
    """The seqs still queued that ``last``, the turn log's last turn, delivered: a harness killed
    between that turn's record and the queue's ``carried`` line left them queued, and a restart
    would carry them a second time."""
    if last is None or last.kind != "turn" or not last.delivered:
        return ()
    delivered = {i.seq for i in last.carried}
    return tuple(i.seq for i in state.queued if i.seq in delivered)


def carry(state: LoopState, seqs: tuple[int, ...]) -> LoopState:
    """``state`` once the items ``seqs`` are carried, as replaying a ``Carried`` line makes it."""
    done = set(seqs)
    ends = [i.end_id for i in state.queued if i.seq in done and i.end_id is not None]
    return attrs.evolve(
        state,
        queued=tuple(i for i in state.queued if i.seq not in done),
        seen=(*state.seen, *ends)[-SEEN_LIMIT:],
    )


async def open_queue_file(path: Path) -> tuple[QueueFile, LoopState]:
    """Open the journal at ``path`` (created if missing) and the state it replays to."""

    def open_sync() -> tuple[QueueFile, LoopState]:
        records, whole = load(path)
        created = not path.exists()
        fd = open_append(path)
        if created:
            fsync_dir(path.parent)
        elif os.fstat(fd).st_size != whole:
            os.truncate(path, whole)  # the cut-off line: never acknowledged
        return QueueFile(path, fd, whole, whole), replay(records)

    return await trio.to_thread.run_sync(open_sync)
