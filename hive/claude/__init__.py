"""The claude backend: one `claude --print` per turn, resuming its session across turns.

Each name is imported from its module on first use: ``hive run`` needs the argv (``_argv``)
before it imports Trio, which the runtime (``_session``) needs.
"""

from typing import TYPE_CHECKING

from hive._lazy import lazy_exports

if TYPE_CHECKING:
    from hive.claude._argv import turn_argv, turn_env
    from hive.claude._session import ClaudeChoices, InfiniteSession, open_claude_runtime

__all__ = ["ClaudeChoices", "InfiniteSession", "open_claude_runtime", "turn_argv", "turn_env"]


if not TYPE_CHECKING:  # the type checker sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)
