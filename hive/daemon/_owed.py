"""The outbox as a pure model: what a daemon owes the agent, keyed by id; no Trio, no I/O.

Each item (a task's end, a subagent turn's end, a watch's match wake) is owed from the moment
it may come until the agent is *told* it, in exactly one of two ways (only the agent settles
its ends):

- an answer carrying it was written to a client still connected (:meth:`OwedItems.released`
  with ``told``, or :meth:`OwedItems.told`), or
- its wake was acknowledged by the agent's socket (:meth:`OwedItems.acked`).

Under a harness (``shown_needs_ack``: the daemon has an agent socket) an answer counts only once
the harness has it: the agent may die before it reads what was written to its pipe. The item
then goes out as a wake marked shown (``SendWake.shown``), and is owed until that wake is
acknowledged. A wake waits while a caller holds the item to answer with it, and goes out once
the item came and nobody holds it; it is sent at most once in a daemon's life (a restart sends
it again: told twice, never lost).

Each call answers with the actions that carry it out: :class:`SendWake` and
:class:`WithdrawWake` for the courier, :class:`Settled` for what owes the item on disk.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

import attrs

K = TypeVar("K", bound=Hashable)


@attrs.frozen
class Telling:
    """Where one owed item is in being told."""

    owed: bool = True
    """The agent has not been told it (in this daemon's knowledge)."""
    ended: bool = False
    """It has come (the end is known): there is something to tell."""
    holds: int = 0
    """Callers waiting to answer with it: its wake waits for them."""
    wake_sent: bool = False
    """Its wake is with the courier (sent at most once in a daemon's life)."""


T = TypeVar("T", bound=Telling)


@attrs.frozen
class SendWake(Generic[K]):
    """Hand the item's wake to the courier (sent until acknowledged). ``shown``: it was just
    answered inline to the agent's own call; the wake says when, for the harness to judge."""

    key: K
    shown: bool = False


@attrs.frozen
class WithdrawWake(Generic[K]):
    """Take the item's wake back from the courier: it was told another way."""

    key: K


@attrs.frozen
class Settled(Generic[K]):
    """The item was told: remove what owes it on disk."""

    key: K


@attrs.define(eq=False)
class OwedItems(Generic[K, T]):
    """Every item owed or held, by key; a package adds what it keeps of each beside its telling
    (a subclass of :class:`Telling`) and overrides :meth:`_put` to index them."""

    _items: dict[K, T] = attrs.field(factory=dict)
    shown_needs_ack: bool = False
    """An item answered inline stays owed until its shown wake is acknowledged (the daemon has
    an agent socket); else the answer tells it."""

    def item(self, key: K) -> T | None:
        return self._items.get(key)

    def owes(self, key: K) -> bool:
        """Whether the agent is owed this item."""
        item = self._items.get(key)
        return item is not None and item.owed

    def held(self, key: K) -> bool:
        """Whether a caller waits to answer with this item."""
        item = self._items.get(key)
        return item is not None and item.holds > 0

    def owed(self) -> Iterator[K]:
        """The items owed."""
        return (key for key, item in self._items.items() if item.owed)

    def _put(self, key: K, item: T | None) -> None:
        """Keep ``item`` while it is owed or held; else forget it."""
        if item is not None and (item.owed or item.holds):
            self._items[key] = item
        else:
            self._items.pop(key, None)

    # -- the telling rule -----------------------------------------------------------------------

    def hold(self, key: K, new: T) -> None:
        """A caller waits to answer with the item (``new``: what is known of one not owed)."""
        item = self._items.get(key, new)
        self._put(key, attrs.evolve(item, holds=item.holds + 1))

    def came(self, key: K) -> tuple[SendWake[K], ...]:
        """The item has come (``ended``): its wake goes out unless a caller holds it."""
        item = self._items.get(key)
        if item is None or item.ended:
            return ()
        item = attrs.evolve(item, ended=True)
        sends: tuple[SendWake[K], ...] = ()
        if item.owed and not item.holds and not item.wake_sent:
            item = attrs.evolve(item, wake_sent=True)
            sends = (SendWake(key),)
        self._put(key, item)
        return sends

    def released(
        self, key: K, *, told: bool, shown_needs_ack: bool | None = None
    ) -> tuple[SendWake[K] | WithdrawWake[K] | Settled[K], ...]:
        """A caller that held the item is done; ``told``: its answer carried the item and was
        written to a client still connected. ``shown_needs_ack`` in place of the model's, for a
        daemon whose callers differ (a subagent daemon's each have an agent socket or not)."""
        item = self._items.get(key)
        if item is None:
            return ()
        item = attrs.evolve(item, holds=max(0, item.holds - 1))
        actions: tuple[SendWake[K] | WithdrawWake[K] | Settled[K], ...] = ()
        needs_ack = self.shown_needs_ack if shown_needs_ack is None else shown_needs_ack
        if told and item.ended and item.owed and needs_ack:
            item = attrs.evolve(item, wake_sent=True)
            actions = (SendWake(key, shown=True),)
        elif told and item.ended and item.owed:
            item = attrs.evolve(item, owed=False)
            actions = (WithdrawWake(key), Settled(key))
        elif item.owed and item.ended and not item.holds and not item.wake_sent:
            item = attrs.evolve(item, wake_sent=True)
            actions = (SendWake(key),)
        self._put(key, item)
        return actions

    def told(self, key: K) -> tuple[WithdrawWake[K] | Settled[K], ...]:
        """The agent has seen the item in an answer."""
        item = self._items.get(key)
        if item is None or not item.owed:
            return ()
        self._put(key, attrs.evolve(item, owed=False))
        return (WithdrawWake(key), Settled(key))

    def acked(self, key: K) -> tuple[Settled[K]]:
        """The agent's socket acknowledged the item's wake."""
        item = self._items.get(key)
        if item is not None:
            self._put(key, attrs.evolve(item, owed=False))
        return (Settled(key),)

    def owe(self, key: K, item: T) -> tuple[SendWake[K], ...]:
        """Owe ``item`` (begun, or found again by a restarted daemon); its wake goes out if it
        has come and nobody holds it."""
        if item.ended and item.owed and not item.holds and not item.wake_sent:
            self._put(key, attrs.evolve(item, wake_sent=True))
            return (SendWake(key),)
        self._put(key, item)
        return ()
