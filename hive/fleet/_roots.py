"""Where ``hive ls`` looks when it is given no directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from hive._limits import state_dir_path
from hive.errors import BadInput

MODULE_ROOT = Path("/var/lib/hyperhive")
"""Where the NixOS module keeps one state directory per agent."""


class NotARoot(BadInput):
    """A directory given to ``hive ls`` or ``hive web`` that is missing or not a directory."""


def given_roots(dirs: list[Path]) -> list[Path]:
    """The directories given on the command line, made absolute; NotARoot for the first that
    is missing or not a directory."""
    for given in dirs:
        if not given.is_dir():
            why = "not a directory" if given.exists() else "no such directory"
            raise NotARoot(f"{given}: {why}; give agents' state directories, or directories of them")
    return [given.absolute() for given in dirs]


def default_roots(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """``HIVE_STATE_ROOT`` (one or more, ``:``-separated), else the NixOS module's
    ``/var/lib/hyperhive`` where it exists, else the one default state directory."""
    roots = [Path(p) for p in environ.get("HIVE_STATE_ROOT", "").split(":") if p]
    if roots:
        return roots
    if MODULE_ROOT.is_dir():
        return [MODULE_ROOT]
    return [Path(state_dir_path(environ))]
