"""The errors a caller of the subagent tools can cause; each message says what to do."""

from __future__ import annotations


class SubagentError(Exception):
    """Base of the errors a tool answers with ``isError: true``."""

    @property
    def kind(self) -> str:
        """The error's name, as the tool's answer carries it in ``error``."""
        return type(self).__name__


class BadArgument(SubagentError):
    """A tool argument is missing, of the wrong type or out of range."""


class UnknownSubagent(SubagentError):
    """No session has this name."""


class NameBusy(SubagentError):
    """A turn of this name is starting or running."""


class NameStopping(SubagentError):
    """An interrupted turn of this name has not ended yet."""


class DaemonUnavailable(SubagentError):
    """The subagent daemon cannot be reached or started."""
