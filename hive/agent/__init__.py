"""The harness for one agent (``hive-agent``): the agent socket, the durable wake queue, the turn
loop through a Runtime, compaction, the turn log.

``hive-agent`` itself is ``hive.agent.harness``. What other parts of hive use of it is here,
each name imported from its module on first use (``hive agent log`` must not pay for Trio).
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "SESSION_FILE",
    "TOOLS",
    "TURN_LOG",
    "Arrived",
    "Harness",
    "HyperhiveTools",
    "Item",
    "ItemKind",
    "LogRenderer",
    "OptionsError",
    "Phase",
    "PreviousStillRunning",
    "SessionFile",
    "SessionStore",
    "TurnLog",
    "TurnRecord",
    "encode",
    "open_harness",
    "open_queue_file",
    "parse_options",
    "queued_messages",
    "render_line",
    "render_log",
    "saved_session",
]

if TYPE_CHECKING:
    from hive.agent._harness_files import SessionFile, TurnRecord, encode
    from hive.agent._hyperhive_tools import TOOLS, HyperhiveTools
    from hive.agent._log import TurnLog
    from hive.agent._loop import SESSION_FILE, TURN_LOG, Harness, open_harness
    from hive.agent._model import Arrived, Item, ItemKind, Phase
    from hive.agent._options import OptionsError, parse_options
    from hive.agent._orphans import PreviousStillRunning
    from hive.agent._queue import open_queue_file, queued_messages
    from hive.agent._render import LogRenderer, render_line, render_log
    from hive.agent._session import SessionStore, saved_session

export_lazily(__name__)
