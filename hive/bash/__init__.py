"""Background bash: the daemon that owns task processes, its MCP tools, the stdio relay, the CLI client.

Names are re-exported lazily so that ``hive.bash.relay`` (standard library only) can be
imported without pulling in Trio or the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.bash._errors import BadArgument, BashError, DaemonUnavailable, DiskError, NameBusy, UnknownTask
    from hive.bash._launch import DaemonFailedToStart, running_daemon
    from hive.bash._model import TaskState
    from hive.bash._records import LooseEnd, TaskRecord
    from hive.bash._wire import RecordError, decode
    from hive.bash.client import BashClient, open_bash_client
    from hive.bash.daemon import DaemonConfig, serve_daemon

__all__ = [
    "BadArgument",
    "BashClient",
    "BashError",
    "DaemonConfig",
    "DaemonFailedToStart",
    "DaemonUnavailable",
    "DiskError",
    "LooseEnd",
    "NameBusy",
    "RecordError",
    "TaskRecord",
    "TaskState",
    "UnknownTask",
    "decode",
    "open_bash_client",
    "running_daemon",
    "serve_daemon",
]

_HOMES = {
    "BadArgument": "_errors",
    "BashError": "_errors",
    "DaemonUnavailable": "_errors",
    "DiskError": "_errors",
    "NameBusy": "_errors",
    "UnknownTask": "_errors",
    "DaemonFailedToStart": "_launch",
    "running_daemon": "_launch",
    "TaskState": "_model",
    "LooseEnd": "_records",
    "TaskRecord": "_records",
    "RecordError": "_wire",
    "decode": "_wire",
    "BashClient": "client",
    "open_bash_client": "client",
    "DaemonConfig": "daemon",
    "serve_daemon": "daemon",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hive.bash' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hive.bash.{home}"), name)
