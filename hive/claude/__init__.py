"""The claude backend: one `claude --print` per turn, resuming its session across turns.

Each name is imported from its module on first use: ``hive run`` needs the argv (``_argv``)
before it imports Trio, which the runtime (``_session``) needs.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = ["ClaudeChoices", "InfiniteSession", "open_claude_runtime", "turn_argv", "turn_env"]

if TYPE_CHECKING:
    from hive.claude._argv import turn_argv, turn_env
    from hive.claude._session import ClaudeChoices, InfiniteSession, open_claude_runtime

export_lazily(__name__)
