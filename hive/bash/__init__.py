"""Background bash: the daemon that owns task processes, its MCP tools, the stdio relay, the CLI client.

Names are re-exported lazily so that ``hive.bash.relay`` (standard library only) can be
imported without pulling in Trio or the daemon kit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

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
    "TaskSettings",
    "TaskState",
    "TaskStore",
    "UnknownTask",
    "decode",
    "open_bash_client",
    "read_tail",
    "running_daemon",
    "serve_daemon",
]

if TYPE_CHECKING:
    from hive.bash._errors import BadArgument, BashError, DaemonUnavailable, DiskError, NameBusy, UnknownTask
    from hive.bash._launch import DaemonFailedToStart, running_daemon
    from hive.bash._model import TaskState
    from hive.bash._records import LooseEnd, TaskRecord
    from hive.bash._settings import TaskSettings
    from hive.bash._store import TaskStore, read_tail
    from hive.bash._wire import RecordError, decode
    from hive.bash.client import BashClient, open_bash_client
    from hive.bash.daemon import DaemonConfig, serve_daemon

export_lazily(__name__)
