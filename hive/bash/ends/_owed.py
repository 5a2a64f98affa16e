"""The owed-end protocol of the bash daemon as a pure model: events in, actions out; no Trio, no I/O.

Every run of a task (a task id and a serial: a :data:`Key`; the end id its wake carries is
``<id>:<serial>``) owes the agent its end from the moment it may start until the agent is *told*
the end, by the kit's rule (`hive.daemon._owed`): an answer to a client still connected
(:class:`Released` with ``told``, or :class:`Told`; under a harness, only once its shown wake is
acknowledged), or an acknowledged wake (:class:`Acked`). What is the bash daemon's own is where
each end is owed on disk.

Nothing else ends a debt: not a client that went away mid-wait, not a new run taking the same
name, not a restart of the daemon. While a run owes its end, a *loose end* on disk says so:
``mcp-loose-ends/bash-task-<id>.json`` for the latest run of an id (:attr:`Place.LATEST`), and
``bash-task-<id>@<serial>.json`` (:attr:`Place.OWN`) once a later run has taken the name, so that
each run's end is owed on its own. A run's loose end is on disk before its process starts, and
before its final record (see :meth:`OwedEnds.may_record_end`): whenever the daemon dies, every
owed end is in a loose end or in a record that is not final, and a restarted daemon owes it
again (:func:`plan_recovery`), re-sending it with the same end id.

:class:`OwedEnds` takes the events and answers with the actions that carry them out:

- :class:`PersistLooseEnd`, :class:`SetAside`, :class:`DropLooseEnd`: the loose ends on disk. The
  actions for one run are carried out in the order they were given (the ledger keeps a line per
  run), and each that lands is reported back as :class:`Stored`: the model counts a loose end as
  on disk only once it has landed.
- :class:`SendWake`, :class:`WithdrawWake`: the wake courier (the kit's actions, as is
  :data:`DropLooseEnd`).

No loose end is written to the latest path of an id while it holds another run's owed end: that
end is first set aside (:class:`Began` asks for it, :class:`Interval` asks again if it failed).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping

import attrs

from hive.daemon import OwedItems, SendWake, Settled, Telling, WithdrawWake

Key = tuple[str, str]
"""A run: its task id and its serial."""


class Place(enum.Enum):
    """Where the loose end of a run is kept."""

    LATEST = "latest"
    """``bash-task-<id>.json``: the loose end of the id's latest run."""
    OWN = "own"
    """``bash-task-<id>@<serial>.json``: the loose end of a run whose name a later run took."""


class Content(enum.Enum):
    """What a run's loose end on disk holds, as far as the model knows (what has landed)."""

    NONE = "none"
    """No loose end: never saved, or removed."""
    OPEN = "open"
    """Saved without the wake (as the run started): it owes the end, and the record says whether
    the end came."""
    WAKE = "wake"
    """Saved with the wake of its end; or, for an end with no task (:class:`Unclaimed`), all there
    is to know of it."""


@attrs.frozen
class Debt(Telling):
    """Where one run is in the protocol: how far it is told, and where it is owed on disk."""

    stored: Content = Content.NONE
    at: Place | None = None
    """Where the loose end that landed is (None with :attr:`Content.NONE`)."""
    superseded: bool = False
    """A later run has its name: its loose end belongs at :attr:`Place.OWN`."""
    superseded_by: str | None = None
    """The serial of the later run whose start may still fail (see :class:`Abandoned`)."""
    unclaimed: bool = False
    """No task of its own: only the loose end a restarted daemon found is known of it."""
    starting: bool = False
    """Its start is under way: its loose end is saved by the spawn, with its record, or not at
    all (a start that fails leaves nothing)."""

    @property
    def place(self) -> Place:
        """Where its loose end is to be written."""
        return Place.OWN if self.superseded else Place.LATEST


# -- events ---------------------------------------------------------------------------------------


@attrs.frozen
class Began:
    """A new run takes its task id. It owes its end from here, held for the caller of `run`;
    the ends still owed under the same id are set aside (see :class:`Spawning`)."""

    key: Key


@attrs.frozen
class Spawning:
    """The new run's process is about to start: its loose end is saved with its record. No
    action means that the latest path still holds an owed end that was not set aside, and the
    run must not start."""

    key: Key


@attrs.frozen
class Abandoned:
    """The run's start failed before its process ran: nothing of it is owed, and the ends it
    superseded are the latest again unless they were already set aside."""

    key: Key


@attrs.frozen
class Ended:
    """The run's final state is known (it exited, or a restarted daemon settled it)."""

    key: Key


@attrs.frozen
class Held:
    """A caller waits to answer with the run's end (`status`, `stop`, or `run` reporting the
    previous run of the name)."""

    key: Key


@attrs.frozen
class Released:
    """A caller that held the run is done; ``told``: its answer carried the final state and was
    written to a client still connected."""

    key: Key
    told: bool


@attrs.frozen
class Told:
    """The agent has seen the run's final state in an answer."""

    key: Key


@attrs.frozen
class Acked:
    """The agent's socket acknowledged the run's wake."""

    key: Key


@attrs.frozen
class Stored:
    """A loose-end action landed: the run's loose end on disk now holds ``content`` at ``at``."""

    key: Key
    content: Content
    at: Place | None


@attrs.frozen
class Interval:
    """The periodic pass: the loose ends of owed ends that have ended get their wake, and what
    failed to land is asked for again."""


@attrs.frozen
class Recovered:
    """A restarted daemon found this run by its record (or its process, or its files). ``content``
    and ``at``: the loose end of its own found with it. A run whose record was not final is owed
    whatever was found; a final one only if its loose end was found."""

    key: Key
    ended: bool
    content: Content = Content.NONE
    at: Place | None = None


@attrs.frozen
class Unclaimed:
    """A restarted daemon found a loose end that no task of its owns: an earlier run's (at
    :attr:`Place.OWN`, or at the latest path of an id whose record is a later run's:
    ``superseded``), or one whose record was lost. Its end is owed as the loose end tells it."""

    key: Key
    at: Place
    superseded: bool = False


Event = (
    Began
    | Spawning
    | Abandoned
    | Ended
    | Held
    | Released
    | Told
    | Acked
    | Stored
    | Interval
    | Recovered
    | Unclaimed
)


# -- actions --------------------------------------------------------------------------------------


@attrs.frozen
class PersistLooseEnd:
    """Save the run's loose end at ``at``, with the wake of its end if ``wake``."""

    key: Key
    wake: bool
    at: Place
    durable: bool


@attrs.frozen
class SetAside:
    """Save the run's loose end, with its wake, at :attr:`Place.OWN` (durably), then remove it
    from the latest path if it is still there."""

    key: Key


DropLooseEnd = Settled
"""Remove the run's loose end: at :attr:`Place.OWN`, and at the latest path only if the loose end
there is this run's (the kit's :class:`Settled`: the end was told)."""

Action = PersistLooseEnd | SetAside | Settled[Key] | SendWake[Key] | WithdrawWake[Key]
LooseEndAction = PersistLooseEnd | SetAside | Settled[Key]


# -- the model ------------------------------------------------------------------------------------


@attrs.define(eq=False)
class OwedEnds(OwedItems[Key, Debt]):
    """Every run the protocol is about: those that owe their end, and those a caller holds."""

    _serials: dict[str, set[str]] = attrs.field(factory=dict)
    """The serials of the runs known, by task id."""

    debt = OwedItems.item

    def may_record_end(self, key: Key) -> bool:
        """Whether the run's final record may be saved: not while its end is owed with no loose
        end on disk (a crash then would leave a final record and nothing owing the end)."""
        debt = self._items.get(key)
        return debt is None or not debt.owed or debt.stored is not Content.NONE

    def blocked(self, key: Key) -> bool:
        """Whether the latest path of the run's id holds another run's owed end."""
        return any(debt.owed and debt.at is Place.LATEST for _other, debt in self._others(key))

    def _others(self, key: Key) -> list[tuple[Key, Debt]]:
        """The other runs of the same id."""
        task_id, serial = key
        return [
            ((task_id, s), self._items[task_id, s]) for s in self._serials.get(task_id, ()) if s != serial
        ]

    def handle(self, event: Event) -> tuple[Action, ...]:  # noqa: PLR0911, PLR0912 - a case each
        """Take ``event``; the actions that carry it out, in order."""
        match event:
            case Began(key):
                return self._began(key)
            case Spawning(key):
                debt = self._items.get(key)
                if debt is None or not debt.owed or self.blocked(key):
                    return ()
                return (PersistLooseEnd(key, wake=False, at=Place.LATEST, durable=False),)
            case Abandoned(key):
                self._abandoned(key)
                return ()
            case Ended(key):
                return self._ended(key)
            case Held(key):
                self.hold(key, Debt(owed=False))
                return ()
            case Released(key, told):
                return self.released(key, told=told)
            case Told(key):
                return self.told(key)
            case Acked(key):
                return self.acked(key)
            case Stored(key, content, at):
                debt = self._items.get(key)
                if debt is not None:
                    self._put(key, attrs.evolve(debt, stored=content, at=at, starting=False))
                return ()
            case Interval():
                return tuple(self._interval())
            case Recovered(key, ended, content, at):
                return self._recovered(key, ended=ended, content=content, at=at)
            case Unclaimed(key, at, superseded):
                debt = Debt(
                    ended=True,
                    stored=Content.WAKE,
                    at=at,
                    superseded=superseded or at is Place.OWN,
                    unclaimed=True,
                )
                aside: tuple[Action, ...] = (SetAside(key),) if debt.superseded and at is Place.LATEST else ()
                return (*aside, *self.owe(key, debt))
        raise AssertionError(f"unknown event {event!r}")

    # -- transitions ------------------------------------------------------------------------------

    def _put(self, key: Key, item: Debt | None) -> None:
        super()._put(key, item)
        task_id, serial = key
        if key in self._items:
            self._serials.setdefault(task_id, set()).add(serial)
        elif serial in self._serials.get(task_id, ()):
            # Told and no longer held (or abandoned): nothing is left to know of it.
            serials = self._serials[task_id]
            serials.discard(serial)
            if not serials:
                del self._serials[task_id]

    def _persist(self, key: Key, debt: Debt, *, durable: bool) -> Action | None:
        """The write that makes the run's loose end say what is known of it, unless the latest
        path is another owed end's."""
        if debt.place is Place.LATEST and self.blocked(key):
            return None
        return PersistLooseEnd(key, wake=debt.ended, at=debt.place, durable=durable)

    def _began(self, key: Key) -> tuple[Action, ...]:
        if key in self._items:
            return ()
        actions: list[Action] = []
        for other, debt in self._others(key):
            if not debt.owed:
                continue
            if not debt.superseded:
                self._put(other, attrs.evolve(debt, superseded=True, superseded_by=key[1]))
            if debt.at is not Place.OWN:
                actions.append(SetAside(other))
        return (*actions, *self.owe(key, Debt(holds=1, starting=True)))

    def _abandoned(self, key: Key) -> None:
        self._put(key, None)
        for other, debt in self._others(key):
            if debt.superseded_by == key[1]:
                # Set aside already, it stays there; else it is the latest run's end again.
                self._put(other, attrs.evolve(debt, superseded=debt.at is Place.OWN, superseded_by=None))

    def _ended(self, key: Key) -> tuple[Action, ...]:
        # The wake is sent before anything is saved: the loose end that is there already owes
        # the end, so a crash before the saves land sends it again (at least once).
        debt = self._items.get(key)
        if debt is None or debt.ended:
            return ()
        actions: list[Action] = list(self.came(key))
        debt = self._items[key]
        if debt.owed and debt.stored is Content.NONE:
            # No loose end landed (a save failed): one now, before the final record.
            persist = self._persist(key, debt, durable=True)
            if persist is not None:
                actions.append(persist)
        return tuple(actions)

    def _interval(self) -> Iterator[Action]:
        for key, debt in list(self._items.items()):
            if not debt.owed or debt.starting:
                continue
            if debt.superseded and debt.at is Place.LATEST:
                yield SetAside(key)  # it failed before: the latest path is still its
            elif not debt.unclaimed and (
                debt.stored is Content.NONE or (debt.ended and debt.stored is not Content.WAKE)
            ):
                persist = self._persist(key, debt, durable=False)
                if persist is not None:
                    yield persist

    def _recovered(self, key: Key, *, ended: bool, content: Content, at: Place | None) -> tuple[Action, ...]:
        if ended and content is Content.NONE:
            return ()  # a final record and no loose end: its end was told
        found_at = None if content is Content.NONE else at
        # Found only at a path of its own (a set-aside cut short): it stays there.
        debt = Debt(ended=ended, stored=content, at=found_at, superseded=found_at is Place.OWN)
        actions: list[Action] = []
        if content is Content.NONE or (ended and content is not Content.WAKE):
            persist = self._persist(key, debt, durable=True)
            if persist is not None:
                actions.append(persist)
        return (*actions, *self.owe(key, debt))


# -- recovery -------------------------------------------------------------------------------------


@attrs.frozen
class Found:
    """A loose end a starting daemon found: whose it is, where, and whether it holds the wake."""

    key: Key
    at: Place
    content: Content


@attrs.frozen
class RecoveryPlan:
    """What a starting daemon makes of the loose ends it found, beside the records it found."""

    runs: Mapping[Key, Found | None]
    """Each record's run, with its own loose end (at the latest path if it is there)."""
    superseded: tuple[Found, ...]
    """At the latest path of an id whose record is another (later) run's: set aside, and owed."""
    earlier: tuple[Found, ...]
    """At a path of their own, of no record found: earlier runs of a reused name, owed."""
    orphans: Mapping[str, Found]
    """At the latest path of an id with no record: its run may yet be found (by its process or
    its files); if not, its end is owed as the loose end tells it."""

    def owed(self, finals: Mapping[Key, bool]) -> set[Key]:
        """The runs a restart owes, given which records are final (the orphans unclaimed)."""
        owed = {key for key, found in self.runs.items() if found is not None or not finals[key]}
        owed |= {f.key for f in self.superseded}
        owed |= {f.key for f in self.earlier}
        owed |= {f.key for f in self.orphans.values()}
        return owed


def plan_recovery(records: Iterable[Key], found: Iterable[Found]) -> RecoveryPlan:
    """Match the loose ends found to the records found (one current record per id)."""
    by_id = {task_id: serial for task_id, serial in records}
    runs: dict[Key, Found | None] = {(task_id, serial): None for task_id, serial in by_id.items()}
    superseded: list[Found] = []
    earlier: list[Found] = []
    orphans: dict[str, Found] = {}
    placed: set[Key] = set()
    # The latest path first: where a run's loose end is at both paths (a set-aside cut short),
    # it is the one the run goes by, and the run is owed once.
    for loose_end in sorted(found, key=lambda f: f.at is not Place.LATEST):
        task_id = loose_end.key[0]
        if loose_end.key in placed:
            continue
        placed.add(loose_end.key)
        if loose_end.key in runs:
            runs[loose_end.key] = loose_end
        elif loose_end.at is Place.OWN:
            earlier.append(loose_end)
        elif task_id in by_id:
            superseded.append(loose_end)
        else:
            orphans[task_id] = loose_end
    return RecoveryPlan(runs, tuple(superseded), tuple(earlier), orphans)
