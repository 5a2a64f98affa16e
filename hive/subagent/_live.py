"""A live turn of a subagent: what the daemon holds of it from its claim until its task is done."""

from __future__ import annotations

import time

import attrs
import trio

from hive.subagent._agents import TurnAgent
from hive.subagent._slots import Arm


@attrs.define(eq=False)
class Live:
    """A turn of a name, from its claim until its task is done."""

    name: str
    turn: str
    arm: Arm
    scope: trio.CancelScope
    """The slot's handle: the cancel scope around the turn's ``Runtime.run``."""
    setup: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Around the turn's setup (waiting for the name's earlier turn, opening the runtime):
    an interrupt before ``run`` cancels this one too."""
    opened: bool = False
    """The runtime is open: from here on only ``scope`` is cancelled (a cancel around the
    whole runtime would cut its stop path short)."""
    started_at: float = attrs.field(factory=time.time)
    number: int = 0
    agents: list[TurnAgent] = attrs.field(factory=list)
    interrupted_at: float | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    """The turn has ended (its end is in the record)."""
    done: trio.Event = attrs.field(factory=trio.Event)
    """The turn's task is done (and, for claude, its agents have exited)."""
    waiters: set[object] = attrs.field(factory=set)
    carriers: set[object] = attrs.field(factory=set)
    """The ``status`` calls that were waiting when the turn ended: their answers carry the end."""
