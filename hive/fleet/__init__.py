"""The fleet: every agent's state directory under a root, read at a glance (``hive ls``).

Each name is imported from its module on first use.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "ASK_SECONDS",
    "AgentView",
    "Fleet",
    "default_roots",
    "given_roots",
    "is_state_dir",
    "make_app",
    "state_dirs",
    "survey",
    "survey_all",
]

if TYPE_CHECKING:
    from hive.fleet._roots import default_roots, given_roots
    from hive.fleet._survey import ASK_SECONDS, AgentView, is_state_dir, state_dirs, survey, survey_all
    from hive.fleet._web import Fleet, make_app

export_lazily(__name__)
