"""Telling a caller how its subagents' turns ended: in the answer of a ``status`` call that shows
the end, else by a wake from ``subagent-<name>`` to the caller's agent socket.

When an end counts as told is the kit's rule (`hive.daemon.OwedItems`), each end keyed
``<name>:<turn>``: a wake the agent socket took, or an answer its client got (under a harness,
the caller having an agent socket, only once the harness took the end's wake marked shown), and
the ``status`` calls that waited for it hold its wake until they answered. A told end is marked
``told`` in the record; one not yet told when the daemon stops is told at its next start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from hive.agent_socket import Wake, WakeCourier
from hive.daemon import OwedItems, SendWake, Settled, Telling, WithdrawWake
from hive.subagent._ledger import Ledger
from hive.subagent._live import Live
from hive.subagent._session_records import SessionRecord, TurnEnd


class Courier(Protocol):
    """What the teller needs of a courier (`hive.agent_socket.WakeCourier`; tests hand it a fake)."""

    def send(self, key: str, socket: Path, wake: Wake) -> None: ...

    def withdraw(self, key: str) -> None: ...

    def start(self, nursery: trio.Nursery) -> None: ...


CourierFactory = Callable[[Callable[[str], None]], Courier]
"""Makes the courier, given what it calls once a wake is acknowledged."""


def wake_courier(on_acked: Callable[[str], None]) -> Courier:
    """The courier of a subagent daemon: the one of both daemons, its wakes keyed ``<name>:<turn>``."""
    return WakeCourier[str](on_acked=on_acked)


WAKE_TAIL = 1500
"""How much of a result's text a wake carries (status shows more)."""


@attrs.define(eq=False)
class Teller:
    """Owes each session's last end to its caller until it is told."""

    ledger: Ledger
    courier_factory: CourierFactory
    courier: Courier = attrs.field(init=False)
    ends: OwedItems[str, Telling] = attrs.field(factory=OwedItems)

    def __attrs_post_init__(self) -> None:
        self.courier = self.courier_factory(self.acked)

    def came(self, record: SessionRecord, *, holds: int = 0) -> None:
        """The session's last end is owed (its turn ended, ``holds`` status calls waiting for
        it; or a restarted daemon found it not told)."""
        end = record.last
        if end is not None and not end.told:
            self._carry_out(self.ends.owe(_key(record.name, end.turn), Telling(ended=True, holds=holds)))

    def acked(self, key: str) -> None:
        """The agent socket took the wake sent under ``key``."""
        self._carry_out(self.ends.acked(key))

    def after_answer(
        self, token: object, carried: list[Live], shown: list[tuple[str, str]]
    ) -> Callable[[bool], None] | None:
        """What to call once the answer of the ``status`` call ``token`` is written (True) or could
        not be (False): the ends it ``shown`` (name, turn) are told if it was; the ends of the turns
        it ``carried`` (that ended while it waited, held for it) go by wake if it was not, once no
        other answer carries them. None when it shows no end not yet told."""
        if not carried and not shown:
            return None
        held = {_key(live.name, live.turn) for live in carried}
        seen = {_key(name, turn) for name, turn in shown}
        for key in seen - held:
            self.ends.hold(key, Telling(owed=False))

        def delivered(ok: bool) -> None:
            for live in carried:
                live.carriers.discard(token)
            for key in sorted(held | seen):
                record = self._record(key)
                needs_ack = record is not None and record.agent_socket is not None
                self._carry_out(self.ends.released(key, told=ok and key in seen, shown_needs_ack=needs_ack))

        return delivered

    def _carry_out(self, actions: Iterable[SendWake[str] | WithdrawWake[str] | Settled[str]]) -> None:
        for action in actions:
            record = self._record(action.key)
            match action:
                case SendWake(key, shown) if record is not None and record.agent_socket is not None:
                    assert record.last is not None
                    wake = wake_for(record, record.last)
                    if shown:
                        wake = attrs.evolve(wake, shown_at=time.time())
                    self.courier.send(key, Path(record.agent_socket), wake)
                case WithdrawWake(key):
                    self.courier.withdraw(key)
                case Settled() if record is not None and record.last is not None:
                    record.last.told = True
                    self.ledger.save(record)

    def _record(self, key: str) -> SessionRecord | None:
        """The record whose last end ``key`` names (None once a later turn's end replaced it)."""
        name, _, turn = key.partition(":")
        record = self.ledger.records.get(name)
        return record if record is not None and record.last is not None and record.last.turn == turn else None


def _key(name: str, turn: str) -> str:
    return f"{name}:{turn}"


def wake_for(record: SessionRecord, end: TurnEnd) -> Wake:
    """The wake that tells the caller of ``record`` of its turn's ``end``."""
    how = end.stop_reason + (", an error" if end.is_error else "")
    text = (end.result or "").strip() or "; ".join(end.errors) or "(no result text)"
    if len(text) > WAKE_TAIL:
        text = "…" + text[-(WAKE_TAIL - 1) :]
    body = (
        f"subagent {record.name} ended turn {end.number} ({how}). Result: {text}\n"
        f"status(name={record.name!r}) shows it whole; continue(name={record.name!r}, prompt) goes on."
    )
    return Wake(sender=f"subagent-{record.name}", body=body, end_id=f"subagent-{record.name}:{end.turn}")
