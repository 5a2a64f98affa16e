"""The errors a caller of the subagent tools can cause; each message says what to do."""

from __future__ import annotations

from hive.errors import BadInput, HiveError


class SubagentError(HiveError):
    """Base of hive.subagent's errors; a tool answers those a call meets with ``isError: true``."""

    @property
    def kind(self) -> str:
        """The error's name, as the tool's answer carries it in ``error``."""
        return type(self).__name__


class BadArgument(SubagentError, BadInput):
    """A tool argument is missing, of the wrong type or out of range."""


class UnknownSubagent(SubagentError, LookupError):
    """No session has this name."""


class NameBusy(SubagentError):
    """A turn of this name is starting or running."""


class NameStopping(SubagentError):
    """An interrupted turn of this name has not ended yet."""
