"""A restarted daemon picks up the sessions as the last daemon left them.

A turn that daemon died during is ``lost``; an agent it left running has had its SIGINT (that
daemon's, or the kernel's when that daemon exited: see ``hive._spawn``), is sent no
other, and, on claude, keeps the name until it exits; an end not yet told is told now.
"""

from __future__ import annotations

import logging

import attrs
import trio

from hive.subagent import _slots
from hive.subagent._agents import Host, TurnAgent
from hive.subagent._ledger import Ledger
from hive.subagent._session_records import SessionRecord
from hive.subagent._slot_table import SlotTable
from hive.subagent._slots import Arm
from hive.subagent._telling import Teller
from hive.subagent._turns import end_of

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class Recovery:
    """Takes each record on disk into the daemon's ledger and slots."""

    ledger: Ledger
    slots: SlotTable
    host: Host
    teller: Teller

    def recover(self, record: SessionRecord, nursery: trio.Nursery) -> None:
        """Take ``record`` over; an agent it left running is waited for in ``nursery``."""
        self.ledger.records[record.name] = record
        if record.current is not None:
            current = record.current
            end = end_of(
                current, "lost", failure="the subagent daemon stopped during this turn (killed or crashed)"
            )
            record.agents = [*record.agents, *current.agents]
            record.current, record.last, record.turns = None, end, max(record.turns, current.number)
        adopted: list[TurnAgent] = []
        for pid in record.agents:
            agent = self.host.adopt(pid.pid, pid.start, signalled=True)
            if agent is None:
                continue
            log.info(
                "%s: waiting for the agent (pid %d) an earlier daemon left running", record.name, pid.pid
            )
            pid.signalled = True
            adopted.append(agent)
        record.agents = [pid for pid in record.agents if any(a.pid == pid.pid for a in adopted)]
        self.ledger.save(record)
        if adopted:
            turn = record.last.turn if record.last else "adopted"
            self.slots.step(record.name, _slots.Adopted(Arm(record.backend), turn, None))
            nursery.start_soon(self._outlive, record, turn, adopted)
        self.teller.came(record)

    async def _outlive(self, record: SessionRecord, turn: str, agents: list[TurnAgent]) -> None:
        """Wait for the agents a turn left running; then its name is free."""
        for agent in agents:
            await agent.wait()
        if self.ledger.records.get(record.name) is record:
            record.agents = []
            self.ledger.save(record)
        self.slots.step(record.name, _slots.Exited(turn))
