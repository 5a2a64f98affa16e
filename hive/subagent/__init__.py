"""Subagents: agent sessions an agent starts and steers through MCP tools (``hive-subagent-mcp``).

``relay`` is ``hive-subagent-mcp``, the kit's stdio relay (the parent agent spawns it per turn);
``daemon`` holds the sessions, runs their turns through ``hive.runtime`` and serves the tools as
MCP on its socket through the kit (``_server``); ``_manager`` is the sessions behind the
tools, its jobs in modules of their own (``_ledger``, ``_slot_table``, ``_turn_runner``,
``_telling``, ``_recovery``), ``_slots`` the pure slot transitions (starting, running, stopping).

Each name is imported from its module on first use: the relay, spawned per turn, must not pay
for the daemon's runtimes.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

if TYPE_CHECKING:
    from hive.subagent._agents import SystemHost, TurnAgent
    from hive.subagent._caller import Caller
    from hive.subagent._errors import (
        BadArgument,
        NameBusy,
        NameStopping,
        SubagentError,
        UnknownSubagent,
    )
    from hive.subagent._manager import SubagentManager
    from hive.subagent._session_records import Current, SessionRecord, TurnEnd
    from hive.subagent._slots import Arm, Phase
    from hive.subagent._specs import TOOLS
    from hive.subagent._store import Store
    from hive.subagent._views import Interrupted, Status, View
    from hive.subagent.daemon import DaemonConfig, serve_daemon

__all__ = [
    "TOOLS",
    "Arm",
    "BadArgument",
    "Caller",
    "Current",
    "DaemonConfig",
    "Interrupted",
    "NameBusy",
    "NameStopping",
    "Phase",
    "SessionRecord",
    "Status",
    "Store",
    "SubagentError",
    "SubagentManager",
    "SystemHost",
    "TurnAgent",
    "TurnEnd",
    "UnknownSubagent",
    "View",
    "serve_daemon",
]

export_lazily(__name__)
