"""The slot a subagent's name holds while a turn of it is live: a pure function, no Trio.

A name with no slot is free. A turn claims a slot (``starting``); once its agent process is
up the slot is ``running``; an interrupted claude turn is ``stopping`` until the turn's own
finish, and, if its claude is still alive then (it ignored or has not yet acted on SIGINT),
until that process exits. The ACP arm frees the name as soon as the interrupt sends
``session/cancel``: the ACP agent answers the cancelled prompt on its own connection.

=============================  =========================  ===========================================
event                          slot before                slot after, and what the caller must do
=============================  =========================  ===========================================
``Claim`` (start / continue)   free                       starting
                               starting, running          unchanged; refused ``BUSY``
                               stopping                   unchanged; refused ``STOPPING``
``Spawned``                    starting (same turn)       running
``Interrupt``                  starting, running: claude  stopping; cancel the handle (SIGINT)
                               starting, running: ACP     free; cancel the handle (session/cancel)
                               stopping                   unchanged; nothing sent (one SIGINT a turn)
                               free                       refused ``IDLE``
``Finished`` (the turn's end)  any (same turn)            free; stopping if a claude of it lives on
``Exited`` (its agent exits)   stopping, turn over        free
``Adopted`` (daemon restart)   free: claude               stopping, turn over: a claude the last
                                                          daemon left alive is waited for
                               free: ACP                  free (the ACP arm holds no name)
=============================  =========================  ===========================================

Each slot carries a ``handle``, its turn's cancel scope in the manager (this module never
looks at it): cancelling it is the turn's stop path, which SIGINTs the agent.
"""

from __future__ import annotations

import enum
from typing import Generic, TypeVar

import attrs

H = TypeVar("H")


class Phase(enum.Enum):
    """The slot of a name with a live turn (see the table above)."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"


class Arm(enum.Enum):
    """Which runtime a turn runs on: it decides when an interrupted turn frees its name."""

    CLAUDE = "claude"
    """An interrupted turn holds its name until its claude has exited."""
    ACP = "acp"
    """An interrupted turn frees its name at once: the agent answers the cancel on its own."""


class Refusal(enum.Enum):
    """Why a name's slot refuses what was asked of it (a `Decision`'s ``refused``): the tool's
    error then says what to do instead."""

    BUSY = "busy"
    """A turn of this name is starting or running."""
    STOPPING = "stopping"
    """An interrupted turn of this name has not ended yet (its agent is still exiting)."""
    IDLE = "idle"
    """No turn of this name is live: there is nothing to interrupt."""


@attrs.frozen
class Slot(Generic[H]):
    phase: Phase
    arm: Arm
    turn: str
    """The id of the turn that holds the slot."""
    handle: H
    turn_over: bool = False
    """The turn has finished; the slot waits only for its agent process to exit."""


@attrs.frozen
class Claim(Generic[H]):
    arm: Arm
    turn: str
    handle: H


@attrs.frozen
class Spawned:
    turn: str


@attrs.frozen
class Interrupt:
    pass


@attrs.frozen
class Finished:
    turn: str
    agent_alive: bool
    """Whether an agent process of the turn is still running at its end."""


@attrs.frozen
class Exited:
    turn: str


@attrs.frozen
class Adopted(Generic[H]):
    """A restarted daemon found the agent of an earlier daemon's turn still running."""

    arm: Arm
    turn: str
    handle: H


Event = Claim[H] | Spawned | Interrupt | Finished | Exited | Adopted[H]


@attrs.frozen
class Decision(Generic[H]):
    """What an event did: refused (and why), and the handle to cancel, if any."""

    refused: Refusal | None = None
    cancel: H | None = None

    @property
    def accepted(self) -> bool:
        return self.refused is None


def step(slot: Slot[H] | None, event: Event[H]) -> tuple[Slot[H] | None, Decision[H]]:  # noqa: PLR0911 - a row of the table each
    """The slot of one name after ``event`` (None: the name is free), and what to do."""
    match event:
        case Claim():
            return _claim(slot, event)
        case Interrupt():
            return _interrupt(slot)
        case Finished(turn, agent_alive) if slot is not None and slot.turn == turn:
            if slot.arm is Arm.CLAUDE and agent_alive:
                return attrs.evolve(slot, phase=Phase.STOPPING, turn_over=True), Decision()
            return None, Decision()
        case Spawned(turn) if slot is not None and slot.turn == turn and slot.phase is Phase.STARTING:
            return attrs.evolve(slot, phase=Phase.RUNNING), Decision()
        case Exited(turn) if slot is not None and slot.turn == turn and slot.turn_over:
            return None, Decision()
        case Adopted(arm, turn, handle) if slot is None and arm is Arm.CLAUDE:
            return Slot(Phase.STOPPING, arm, turn, handle, turn_over=True), Decision()
        case Spawned() | Finished() | Exited() | Adopted():
            return slot, Decision()
    raise TypeError(f"not a slot event: {event!r}")


def _claim(slot: Slot[H] | None, claim: Claim[H]) -> tuple[Slot[H] | None, Decision[H]]:
    if slot is None:
        return Slot(Phase.STARTING, claim.arm, claim.turn, claim.handle), Decision()
    return slot, Decision(refused=Refusal.STOPPING if slot.phase is Phase.STOPPING else Refusal.BUSY)


def _interrupt(slot: Slot[H] | None) -> tuple[Slot[H] | None, Decision[H]]:
    if slot is None:
        return None, Decision(refused=Refusal.IDLE)
    if slot.phase is Phase.STOPPING:
        return slot, Decision()
    # The handle is cancelled after the slot has stepped: a claude name is stopping before its
    # SIGINT goes out, and never free until its turn has ended.
    cancel: Decision[H] = Decision(cancel=slot.handle)
    if slot.arm is Arm.ACP:
        return None, cancel
    return attrs.evolve(slot, phase=Phase.STOPPING), cancel
