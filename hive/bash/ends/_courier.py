"""Delivery of owed wakes to the agent socket: at least once, in order, with backoff while it is away.

The sending is :class:`hive.agent_socket.WakeCourier`'s (the subagent daemon's too); what is the bash
daemon's own is that every wake goes to the one agent socket it tells, keyed by task id and serial.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from hive.agent_socket import Wake
from hive.agent_socket import WakeCourier as Sender

Key = tuple[str, str]  # (task id, serial)


@attrs.define(eq=False)
class WakeCourier(Sender[Key]):
    """Holds the wakes not yet acknowledged and sends them whenever the agent socket answers.

    With no agent socket configured nothing is sent, and the loose ends on disk stay as
    the record of what the agent is owed.
    """

    agent_socket: Path | None

    def enqueue(self, task_id: str, serial: str, wake: Wake) -> None:
        """Owe ``wake`` for the end of run ``serial`` of task ``task_id``."""
        self.send((task_id, serial), self.agent_socket, wake)
