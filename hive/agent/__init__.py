"""The harness for one agent (``hive-agent``): the agent socket, the durable wake queue, the turn
loop through a Runtime, compaction, the turn log.

``hive-agent`` itself is ``hive.agent.harness``. What other parts of hive use of it is here,
each name imported from its module on first use (``hive agent log`` must not pay for Trio).
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "LogRenderer",
    "TurnLog",
    "queued_messages",
    "render_log",
    "saved_session",
]

if TYPE_CHECKING:
    from hive.agent._log import TurnLog
    from hive.agent._queue import queued_messages
    from hive.agent._render import LogRenderer, render_log
    from hive.agent._session import saved_session

export_lazily(__name__)
