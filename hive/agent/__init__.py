"""The harness for one agent (``hive-agent``): the agent socket, the durable wake queue, the turn
loop through a Runtime, compaction, the turn log.

``hive-agent`` itself is ``hive.agent.harness``. What other parts of hive use of it is here,
each name imported from its module on first use (``hive agent log`` must not pay for Trio).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hive.agent._follow import follow_lines
    from hive.agent._render import render_live, render_log

_WHERE = {
    "follow_lines": "_follow",
    "render_live": "_render",
    "render_log": "_render",
}

__all__ = ["follow_lines", "render_live", "render_log"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
