"""The slot each subagent name holds: ``_slots.step`` applied to the names of one daemon."""

from __future__ import annotations

import attrs
import trio

from hive.subagent import _slots
from hive.subagent._errors import NameBusy, NameStopping
from hive.subagent._slots import Arm, Phase, Refusal, Slot

Handle = trio.CancelScope | None
"""What a slot carries: its turn's cancel scope (None for an agent adopted after a restart)."""


@attrs.define(eq=False)
class SlotTable:
    """The slots by name; each step wakes whoever waits for the next one (``changed``)."""

    slots: dict[str, Slot[Handle]] = attrs.field(factory=dict)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def step(self, name: str, event: _slots.Event[Handle]) -> _slots.Decision[Handle]:
        """Apply ``event`` to the slot of ``name``, and say what to do."""
        slot, decision = _slots.step(self.slots.get(name), event)
        if slot is None:
            self.slots.pop(name, None)
        else:
            self.slots[name] = slot
        self._changed.set()
        self._changed = trio.Event()
        return decision

    def claim(self, name: str, arm: Arm, turn: str, scope: trio.CancelScope) -> None:
        """Give ``name`` to ``turn``, or raise why it cannot have it now."""
        decision = self.step(name, _slots.Claim(arm, turn, scope))
        if decision.refused is Refusal.STOPPING:
            raise NameStopping(
                f"subagent {name!r} is stopping: its interrupted turn has not ended yet (its agent got "
                "SIGINT and is still exiting). Wait for it with status(name, wait_seconds), then try again."
            )
        if decision.refused is Refusal.BUSY:
            raise NameBusy(
                f"subagent {name!r} is running a turn: wait for it to end (status with wait_seconds; you "
                "are also woken when it ends), or interrupt it first"
            )

    def phase(self, name: str) -> Phase | None:
        """The phase of the slot of ``name``; None when the name is free."""
        slot = self.slots.get(name)
        return slot.phase if slot else None

    async def changed(self) -> None:
        """Wait for the next step."""
        await self._changed.wait()
