"""``hive``: the operator's command line over hive's services (``hive bash``, ``hive agent``,
``hive run``, ``hive demo``)."""

from hive.cli._bash_answer import for_operator
from hive.cli._main import build_parser, main

__all__ = ["build_parser", "for_operator", "main"]
