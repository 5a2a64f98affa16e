"""The claude backend: one `claude --print` per turn, resuming its session across turns."""

from hive.claude._argv import turn_argv, turn_env
from hive.claude._session import ClaudeChoices, InfiniteSession, open_claude_runtime

__all__ = ["ClaudeChoices", "InfiniteSession", "open_claude_runtime", "turn_argv", "turn_env"]
