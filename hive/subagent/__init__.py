"""Subagents: agent sessions an agent starts and steers through MCP tools (``hive-subagent-mcp``).

``server`` is the MCP stdio server (the parent agent spawns it per turn); ``daemon`` holds the
sessions and runs their turns through ``hive.runtime``; ``_manager`` is the sessions behind the
tools, its jobs in modules of their own (``_ledger``, ``_slot_table``, ``_turn_runner``,
``_telling``, ``_recovery``), ``_slots`` the pure slot transitions (starting, running, stopping).

Each name is imported from its module on first use: the MCP server, spawned per turn, must
not pay for the daemon's runtimes.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.subagent._errors import (
        BadArgument,
        DaemonUnavailable,
        NameBusy,
        NameStopping,
        SubagentError,
        UnknownSubagent,
    )
    from hive.subagent._manager import SubagentManager
    from hive.subagent._records import SessionRecord, TurnEnd
    from hive.subagent._slots import Arm, Phase
    from hive.subagent._store import Store
    from hive.subagent._views import Interrupted, Status, View
    from hive.subagent._wire import Caller
    from hive.subagent.daemon import DaemonConfig, serve_daemon

_MODULES = {
    "_errors": (
        "BadArgument",
        "DaemonUnavailable",
        "NameBusy",
        "NameStopping",
        "SubagentError",
        "UnknownSubagent",
    ),
    "_manager": ("SubagentManager",),
    "_records": ("SessionRecord", "TurnEnd"),
    "_slots": ("Arm", "Phase"),
    "_store": ("Store",),
    "_views": ("Interrupted", "Status", "View"),
    "_wire": ("Caller",),
    "daemon": ("DaemonConfig", "serve_daemon"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "Arm",
    "BadArgument",
    "Caller",
    "DaemonConfig",
    "DaemonUnavailable",
    "Interrupted",
    "NameBusy",
    "NameStopping",
    "Phase",
    "SessionRecord",
    "Status",
    "Store",
    "SubagentError",
    "SubagentManager",
    "TurnEnd",
    "UnknownSubagent",
    "View",
    "serve_daemon",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
