"""The harness's queue and turn loop as pure functions of (state, event): no Trio, no I/O.

An item (a wake, an operator's prompt) goes through::

    admitted (pending) --Written--> queued (acknowledged) --a turn carries it, the turn ends-->
    carried --Recorded--> gone (its end id remembered, so a repeat of it is dropped)

and the loop through::

    IDLE --next_step, compaction asked--> COMPACTING --CompactEnded--> IDLE
    IDLE --next_step, items queued--> TURN --TurnEnded(carried)--> RECORDING --Recorded--> IDLE
                                          --TurnEnded(not carried)--> BACKOFF --RetryDue--> IDLE
    anything --Restarted--> IDLE, with what the queue's file holds

A wake whose end was answered inline to the agent (``shown_at``) in the running turn is queued
too, but that turn settles it and never carries it: it leaves with the turn's items once the
turn is ``Recorded``, and becomes an ordinary wake if the turn did not deliver (or a restart
cut it short). A wake is acknowledged only once ``Written`` (durably queued). A turn carries everything
queued when it starts, oldest first (up to a size budget), and nothing that arrives while it
runs. Its items leave the queue only once the turn has ended and that is ``Recorded`` on disk:
a crash before then replays them (a turn that never ended carried nothing; one that ended
just before the crash is carried again). A compaction asked for during a turn runs right
after it, before the next turn; it is asked for only once written too, and is owed until it has
ended, so a crash before then runs it after the restart. The harness's async loop (``hive.agent._loop``) takes every
decision through these functions; ``tests/test_agent_model.py`` drives them with Hypothesis.
"""

from __future__ import annotations

import enum

import attrs

SEEN_LIMIT = 4096
"""How many end ids of carried wakes are remembered (the bash daemon repeats an end only
around its own restarts, shortly after the first time)."""


class ItemKind(enum.Enum):
    """What a queued item is: a wake from a daemon, or an operator's prompt."""

    WAKE = "wake"
    PROMPT = "prompt"


@attrs.frozen
class Message:
    """One message for the agent, as it arrives: a wake or an operator's prompt."""

    kind: ItemKind
    sender: str
    body: str
    end_id: str | None = None
    """The end it tells of (a wake's ``end_id``): a repeat of it is dropped."""
    at: float = 0.0
    """When it arrived (Unix time)."""
    traceparent: str | None = None
    """The span of what sent it (a wake's, see `hive.agent_socket.Wake.traceparent`)."""
    shown_at: float | None = None
    """A wake whose end was answered inline to the agent's call in the running turn (when; see
    `hive.agent_socket.Wake.shown_at`): that turn settles it. Dropped if it delivers, else an ordinary
    wake for the next turn (and so after a restart)."""

    @property
    def shown(self) -> bool:
        return self.shown_at is not None

    @property
    def size(self) -> int:
        """Its bytes in a turn's prompt, near enough (the budget of a turn counts these)."""
        return len(self.sender.encode()) + len(self.body.encode()) + 16


@attrs.frozen
class Item(Message):
    """A message admitted to the queue, numbered in the order of admission."""

    seq: int = attrs.field(kw_only=True)


class Phase(enum.Enum):
    """What the harness is doing: waiting, running a turn, or writing the turn's record."""

    IDLE = "idle"
    TURN = "turn"
    RECORDING = "recording"
    """The turn has ended; its items are being removed from the queue's file."""
    COMPACTING = "compacting"
    BACKOFF = "retrying"
    """A turn could not start; its items wait, still queued, for the retry."""


@attrs.frozen
class LoopState:
    phase: Phase = Phase.IDLE
    next_seq: int = 1
    written_seq: int = 0
    """The highest seq ever written to the queue's file."""
    pending: tuple[Item, ...] = ()
    """Admitted, being written: not acknowledged yet."""
    queued: tuple[Item, ...] = ()
    """Durably queued and acknowledged, oldest first; the running turn's items included."""
    carrying: tuple[int, ...] = ()
    """The seqs of the running turn's items (TURN, RECORDING)."""
    compact: tuple[str, ...] = ()
    """Who asked for the compaction that has not started (empty: none was asked for)."""
    compacting: tuple[str, ...] = ()
    """Who asked for the compaction running (COMPACTING)."""
    seen: tuple[str, ...] = ()
    """End ids of carried wakes, most recent last (at most SEEN_LIMIT)."""

    def waiting(self) -> int:
        """Items queued and not in the running turn (nor shown in it)."""
        return sum(1 for i in self.queued if i.seq not in self.carrying and not i.shown)

    def shown(self) -> tuple[Item, ...]:
        """The wakes the running turn settles (queued, or being written)."""
        return tuple(i for i in (*self.queued, *self.pending) if i.shown)


# -- events --------------------------------------------------------------------------------------


@attrs.frozen
class Arrived(Message):
    """A message arrived: `admit` queues it or drops it as a repeat."""


@attrs.frozen
class Admitted:
    item: Item
    """To be written; acknowledged once it is."""


@attrs.frozen
class Duplicate:
    """A repeat of an end already queued or carried: acknowledged and dropped."""

    original: int | None
    """The seq of the original when it is still being written (answer once it is), else None."""


Admission = Admitted | Duplicate


@attrs.frozen
class Written:
    """These admitted items are in the queue's file: each is acknowledged to its sender."""

    seqs: tuple[int, ...]


@attrs.frozen
class WriteFailed:
    """These admitted items could not be written to the queue's file: none is queued, and each
    sender is told so."""

    seqs: tuple[int, ...]


@attrs.frozen
class TurnEnded:
    carried: bool
    """Whether the turn got its items to the agent (it started, and ended)."""


@attrs.frozen
class Recorded:
    """The ended turn's items, and the wakes shown in it, are gone from the queue's file."""


@attrs.frozen
class SeenInline:
    """The end ``end_id`` was answered inline in a turn that delivered, and ended before its wake
    came: nothing is queued, and a repeat of it is dropped."""

    end_id: str


@attrs.frozen
class RetryDue:
    """The backoff after a turn that could not start is over."""


@attrs.frozen
class CompactAsked:
    """Written to the queue's file: asked for by ``by`` (``operator`` or ``agent``)."""

    by: str


@attrs.frozen
class CompactEnded:
    """The compaction that was running has ended, however it ended."""


@attrs.frozen
class Restarted:
    """The harness starts again after a crash: only what was written survives (a compaction
    that was running is owed again)."""


Event = (
    Written
    | WriteFailed
    | TurnEnded
    | Recorded
    | SeenInline
    | RetryDue
    | CompactAsked
    | CompactEnded
    | Restarted
)


# -- steps the loop is told to take ---------------------------------------------------------------


@attrs.frozen
class StartTurn:
    """Run a turn that carries these items, oldest first."""

    items: tuple[Item, ...]


@attrs.frozen
class StartCompact:
    """Compact the session now, as asked by each of ``by``."""

    by: tuple[str, ...]


Step = StartTurn | StartCompact


def admit(state: LoopState, arrived: Arrived) -> tuple[LoopState, Admission]:
    """Admit an arrival (or drop it as a repeat of an end already queued or carried). A wake
    shown inline is the running turn's to settle; with no turn running it is an ordinary wake
    (the harness judges one whose turn has ended before it comes here)."""
    if arrived.shown and state.phase is not Phase.TURN:
        arrived = attrs.evolve(arrived, shown_at=None)
    if arrived.end_id is not None:
        for item in state.pending:
            if item.end_id == arrived.end_id:
                return state, Duplicate(item.seq)
        if arrived.end_id in state.seen or any(i.end_id == arrived.end_id for i in state.queued):
            return state, Duplicate(None)
    item = Item(**attrs.asdict(arrived, recurse=False), seq=state.next_seq)
    return attrs.evolve(state, next_seq=state.next_seq + 1, pending=(*state.pending, item)), Admitted(item)


def advance(state: LoopState, event: Event) -> LoopState:  # noqa: PLR0911 - a case each
    """The state after ``event``; unchanged when the event does not apply."""
    match event:
        case Written(seqs):
            done = [i for i in state.pending if i.seq in seqs]
            return attrs.evolve(
                state,
                pending=tuple(i for i in state.pending if i.seq not in seqs),
                queued=(*state.queued, *done),
                written_seq=max([state.written_seq, *(i.seq for i in done)]),
            )
        case WriteFailed(seqs):
            return attrs.evolve(state, pending=tuple(i for i in state.pending if i.seq not in seqs))
        case TurnEnded(carried) if state.phase is Phase.TURN:
            if carried:
                return attrs.evolve(state, phase=Phase.RECORDING)
            # What it showed the agent never reached a turn's end: ordinary wakes now.
            return attrs.evolve(
                state,
                phase=Phase.BACKOFF,
                carrying=(),
                queued=_unshown(state.queued),
                pending=_unshown(state.pending),
            )
        case Recorded() if state.phase is Phase.RECORDING:
            gone = set(state.carrying) | {i.seq for i in state.shown()}
            ends = [
                i.end_id for i in (*state.queued, *state.pending) if i.seq in gone and i.end_id is not None
            ]
            return attrs.evolve(
                state,
                phase=Phase.IDLE,
                queued=tuple(i for i in state.queued if i.seq not in gone),
                pending=tuple(i for i in state.pending if i.seq not in gone),
                carrying=(),
                seen=(*state.seen, *ends)[-SEEN_LIMIT:],
            )
        case SeenInline(end):
            return attrs.evolve(state, seen=(*state.seen, end)[-SEEN_LIMIT:])
        case RetryDue() if state.phase is Phase.BACKOFF:
            return attrs.evolve(state, phase=Phase.IDLE)
        case CompactAsked(by) if state.phase is not Phase.COMPACTING:
            return attrs.evolve(state, compact=_with(state.compact, by))
        case CompactEnded() if state.phase is Phase.COMPACTING:
            return attrs.evolve(state, phase=Phase.IDLE, compacting=())
        case Restarted():
            return LoopState(
                next_seq=state.written_seq + 1,
                written_seq=state.written_seq,
                queued=_unshown(state.queued),
                compact=owed_compaction(state),
                seen=state.seen,
            )
    return state


def next_step(state: LoopState, budget: int) -> tuple[LoopState, Step | None]:
    """What the loop does now, if anything: a compaction first, else a turn carrying the
    queue's oldest items whose sizes add up to at most ``budget`` (always at least one)."""
    if state.phase is not Phase.IDLE:
        return state, None
    if state.compact:
        by = state.compact
        return attrs.evolve(state, phase=Phase.COMPACTING, compact=(), compacting=by), StartCompact(by)
    if not state.queued:
        return state, None
    taken: list[Item] = []
    used = 0
    for item in state.queued:
        if taken and used + item.size > budget:
            break
        taken.append(item)
        used += item.size
    carrying = tuple(i.seq for i in taken)
    return attrs.evolve(state, phase=Phase.TURN, carrying=carrying), StartTurn(tuple(taken))


def owed_compaction(state: LoopState) -> tuple[str, ...]:
    """Who asked for the compaction owed (not started, or running): what a restart runs."""
    return state.compacting if state.phase is Phase.COMPACTING else state.compact


def _unshown(items: tuple[Item, ...]) -> tuple[Item, ...]:
    """``items`` with the wakes shown in a turn that did not deliver made ordinary wakes."""
    return tuple(attrs.evolve(i, shown_at=None) if i.shown else i for i in items)


def _with(names: tuple[str, ...], name: str) -> tuple[str, ...]:
    return names if name in names else (*names, name)
