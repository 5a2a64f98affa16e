"""Spawning with and without hive._clone3: the fast path and the fallback, in one process."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from hive import _spawn


def clone3_usable() -> bool:
    """Whether this machine spawns through hive._clone3 (built, and a kernel that has clone3)."""
    return _spawn._mechanism.get() is not None


@contextlib.contextmanager
def without_clone3() -> Iterator[None]:
    """Spawns in this process take the fallback, as where hive._clone3 was not built (said once)."""
    kept = _spawn._mechanism
    _spawn._mechanism = _spawn._Mechanism(loaded=True)
    try:
        yield
    finally:
        _spawn._mechanism = kept


def unbuilt_clone3_path(root: Path) -> str:
    """A PYTHONPATH under ``root`` whose sitecustomize makes ``import hive._clone3`` fail, as in
    an install that could not build it: a process started with it takes the fallback."""
    site = root / "no-clone3"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['hive._clone3'] = None\n")
    return os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
