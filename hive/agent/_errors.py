"""The root of hive.agent's errors (the harness, ``hive-agent``); each message says what to do."""

from __future__ import annotations

from hive.errors import HiveError


class HarnessError(HiveError):
    """Base of the errors of the agent harness and its files, options and tools."""
