"""Background bash: the daemon that owns task processes, its MCP tools, the stdio relay, the CLI client.

Names are re-exported lazily so that ``hive.bash.relay`` (standard library only) can be
imported without pulling in Trio or the daemon kit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "TAIL_BYTES",
    "TOOLS",
    "BadArgument",
    "BashClient",
    "BashError",
    "BashTools",
    "DaemonConfig",
    "DaemonFailedToStart",
    "DaemonProcess",
    "DaemonUnavailable",
    "DiskError",
    "ExitStatus",
    "LooseEnd",
    "NameBusy",
    "OwedWake",
    "RecordError",
    "RunFiles",
    "StoredRun",
    "Tail",
    "TaskManager",
    "TaskRecord",
    "TaskSettings",
    "TaskState",
    "TaskStore",
    "ToolResult",
    "UnknownTask",
    "decode",
    "encode",
    "open_bash_client",
    "read_tail",
    "running_daemon",
    "serial_from_files",
    "serve_daemon",
]

if TYPE_CHECKING:
    from hive.bash._errors import BadArgument, BashError, DaemonUnavailable, DiskError, NameBusy, UnknownTask
    from hive.bash._launch import DaemonFailedToStart, DaemonProcess, running_daemon
    from hive.bash._model import TaskState
    from hive.bash._settings import TaskSettings
    from hive.bash._task_manager import TaskManager
    from hive.bash._tools import TOOLS, BashTools, ToolResult
    from hive.bash.client import BashClient, open_bash_client
    from hive.bash.daemon import DaemonConfig, serve_daemon
    from hive.bash.files._converter import RecordError, decode, encode
    from hive.bash.files._records import LooseEnd, OwedWake, TaskRecord
    from hive.bash.files._store import (
        TAIL_BYTES,
        ExitStatus,
        StoredRun,
        Tail,
        TaskStore,
        read_tail,
        serial_from_files,
    )
    from hive.bash.files._task_files import RunFiles

export_lazily(__name__)
