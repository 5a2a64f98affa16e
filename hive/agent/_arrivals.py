"""What arrives, on its way into the queue's file: each admitted message's line written (those
admitted during a write go out in the next), its sender answered once it is there."""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio

from hive.agent._harness_files import Added, TurnRecord, TurnStart
from hive.agent._model import Arrived, Event, Item, ItemKind, Phase, WriteFailed, Written
from hive.agent._queue import QueueFile
from hive.agent_socket import Refused

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class _Write:
    done: trio.Event = attrs.field(factory=trio.Event)
    error: str | None = None


@attrs.define(eq=False)
class QueueWrites:
    """The lines of the messages admitted, written in batches by `serve`."""

    queue: QueueFile
    _writes: dict[int, _Write] = attrs.field(factory=dict)
    _wanted: trio.Event = attrs.field(factory=trio.Event)

    def want(self, seq: int) -> None:
        """Message ``seq`` was admitted: its line goes out in the next write."""
        self._writes[seq] = _Write()
        self._wanted.set()

    async def wait(self, seq: int) -> None:
        """Return once message ``seq``'s line is written; Refused if it could not be."""
        write = self._writes[seq]
        await write.done.wait()
        if write.error is not None:
            raise Refused(f"the harness could not queue it: {write.error}")

    async def serve(self, pending: Callable[[], tuple[Item, ...]], apply: Callable[[Event], None]) -> None:
        """Write what is ``pending`` (the loop's state, which ``apply`` advances) until cancelled."""
        while True:
            while not pending():
                self._wanted = trio.Event()
                await self._wanted.wait()
            batch = pending()
            seqs = tuple(item.seq for item in batch)
            try:
                await self.queue.append([Added(item) for item in batch])
            except OSError as exc:
                log.error("%s", exc)  # noqa: TRY400 - the message says it all
                apply(WriteFailed(seqs))
                error: str | None = str(exc)
            else:
                apply(Written(seqs))
                error = None
            for seq in seqs:
                write = self._writes.pop(seq)
                write.error = error
                write.done.set()


def judged(
    message: Arrived, phase: Phase, running: TurnStart | None, ended: TurnRecord | None
) -> Arrived | None:
    """A wake whose end was answered inline (``shown_at``): the running turn's to settle if it
    was answered in it; else settled by the turn it was answered in, if that one (``ended``, the
    last turn whose end is known) delivered it (None: nothing to queue); else an ordinary wake
    (that turn did not deliver, or is not known: a harness that crashed meanwhile).

    ``shown_at`` is stamped once the answer is written, which under load may come after the
    agent read it and ended its turn: an end is the last turn's from its start until the next
    turn starts, not only until its own end."""
    shown_at = message.shown_at
    assert shown_at is not None
    next_turn = running if phase is Phase.TURN else None
    if next_turn is not None and next_turn.started <= shown_at:
        return message
    before_next = next_turn is None or shown_at < next_turn.started
    if ended is not None and ended.delivered and ended.started <= shown_at and before_next:
        log.info("end %s was shown in turn %d, which delivered it", message.end_id, ended.turn)
        return None
    return attrs.evolve(message, shown_at=None)


def source(kind: ItemKind, sender: str) -> str:
    """Where a message came from, for the ``hive.wakes`` metric: a few kinds, not every sender."""
    if kind is not ItemKind.WAKE:
        return str(kind.value)
    for prefix, where in (("bash-task-", "bash"), ("subagent-", "subagent")):
        if sender.startswith(prefix):
            return where
    return "other"
