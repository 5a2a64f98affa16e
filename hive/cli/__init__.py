"""``hive``: the operator's command line over hive's services (``hive bash``, ``hive agent``,
``hive run``, ``hive demo``).

Each name is imported from its module on first use, and each command family's parser only for
the command about to be parsed (`build_parser`): ``hive bash`` starts in the time of a bare
interpreter and its client.
"""

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = ["build_parser", "for_operator", "main"]

if TYPE_CHECKING:
    from hive.cli._bash_answer import for_operator
    from hive.cli._main import build_parser, main

export_lazily(__name__)
