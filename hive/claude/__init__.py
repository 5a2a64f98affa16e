"""The claude backend: one `claude --print` per turn, resuming its session across turns.

Each name is imported from its module on first use: ``hive run`` needs the argv (``_argv``)
before it imports Trio, which the runtime (``_session``) needs.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.claude._argv import turn_argv, turn_env
    from hive.claude._session import ClaudeChoices, InfiniteSession, open_claude_runtime

_WHERE = {
    "turn_argv": "_argv",
    "turn_env": "_argv",
    "ClaudeChoices": "_session",
    "InfiniteSession": "_session",
    "open_claude_runtime": "_session",
}

__all__ = ["ClaudeChoices", "InfiniteSession", "open_claude_runtime", "turn_argv", "turn_env"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
