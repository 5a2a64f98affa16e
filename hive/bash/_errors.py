"""The errors a caller of the bash tools can cause, each with a message that says what to do."""

from __future__ import annotations

from hive.errors import BadInput, HiveError


class BashError(HiveError):
    """Base of every error of hive.bash; the daemon reports those a call meets as a tool error."""


class BadArgument(BashError, BadInput):
    """A tool argument has the wrong type or value."""


class NameBusy(BashError):
    """A task name is still held by a pending or running task."""


class UnknownTask(BashError, LookupError):
    """No task has this id."""


class DiskError(BashError, OSError):
    """The state directory cannot be written (full disk, read-only file system, ...)."""


class TaskLimit(BashError, OSError):
    """The daemon is at its task limit: starting another would exhaust its open files."""


class DaemonUnavailable(BashError, ConnectionError):
    """The operator CLI could not reach the daemon's socket."""
