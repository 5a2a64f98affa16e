"""The harness for one agent (``hive-agent``): the agent socket, the durable wake queue, the turn
loop through a Runtime, compaction, the turn log.

``hive-agent`` itself is ``hive.agent.harness``. What other parts of hive use of it is here,
each name imported from its module on first use (``hive agent log`` must not pay for Trio).
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = ["LogRenderer", "follow_lines", "render_log"]

if TYPE_CHECKING:
    from hive.agent._follow import follow_lines
    from hive.agent._render import LogRenderer, render_log

export_lazily(__name__)
