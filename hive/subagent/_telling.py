"""Telling a caller how its subagents' turns ended: in the answer of a ``status`` call that shows
the end, else by a wake from ``subagent-<name>`` to the caller's agent socket.

An end is told once: a wake the agent socket took, or an answer its client confirmed it got,
marks it ``told`` in the record (and withdraws a wake still on its way). Under a harness (the
caller has an agent socket) an answer tells the end only once the harness has it: the agent
may die before it reads what was written to its pipe, so the end goes as a wake marked shown
(when), which the turn it was shown in settles. An end not yet told when the daemon stops is
told at its next start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs

from hive.subagent._courier import Courier
from hive.subagent._ledger import Ledger
from hive.subagent._live import Live
from hive.subagent._records import SessionRecord, TurnEnd
from hive.wake import Wake

CourierFactory = Callable[[Callable[[str], None]], Courier]
WAKE_TAIL = 1500
"""How much of a result's text a wake carries (status shows more)."""


@attrs.define(eq=False)
class Teller:
    """Sends each session's last end to its caller until it is told."""

    ledger: Ledger
    courier_factory: CourierFactory
    courier: Courier = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.courier = self.courier_factory(self.acked)

    def tell(self, record: SessionRecord) -> None:
        """Wake the caller with this session's last end (if it has an agent socket)."""
        end = record.last
        if end is None or end.told or record.agent_socket is None:
            return
        self.courier.send(_key(record.name, end.turn), Path(record.agent_socket), wake_for(record, end))

    def mark_told(self, name: str, turn: str) -> None:
        """The caller has seen the end of ``turn``: it is not sent (again)."""
        record = self.ledger.records.get(name)
        if record is None or record.last is None or record.last.turn != turn or record.last.told:
            return
        record.last.told = True
        self.courier.withdraw(_key(name, turn))
        self.ledger.save(record)

    def shown_inline(self, name: str, turn: str) -> None:
        """An answer the caller's client got showed the end of ``turn``: told now with no agent
        socket, else once the harness took its wake marked shown."""
        record = self.ledger.records.get(name)
        if record is None or record.last is None or record.last.turn != turn or record.last.told:
            return
        if record.agent_socket is None:
            self.mark_told(name, turn)
            return
        wake = attrs.evolve(wake_for(record, record.last), shown_at=time.time())
        self.courier.send(_key(name, turn), Path(record.agent_socket), wake)

    def acked(self, key: str) -> None:
        """The agent socket took the wake sent under ``key``."""
        name, _, turn = key.partition(":")
        self.mark_told(name, turn)

    def after_answer(
        self, token: object, carried: list[Live], shown: list[tuple[str, str]]
    ) -> Callable[[bool], None] | None:
        """What to call once the answer of the ``status`` call ``token`` is written (True) or could
        not be (False): the ends it ``shown`` (name, turn) are told if it was; the ends of the turns
        it ``carried`` (that ended while it waited) go by wake if it was not, and no other answer
        carries them. None when it shows no end not yet told."""
        if not carried and not shown:
            return None

        def delivered(ok: bool) -> None:
            for live in carried:
                live.carriers.discard(token)
            seen = set(shown) if ok else set()
            for shown_name, turn in seen:
                self.shown_inline(shown_name, turn)
            for live in carried:
                if (live.name, live.turn) in seen:
                    continue
                record = self.ledger.records.get(live.name)
                if record is None or record.last is None or live.carriers:
                    continue
                if record.last.turn == live.turn and not record.last.told:
                    self.tell(record)

        return delivered


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
