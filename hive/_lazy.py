"""Lazy exports: a package's face whose names are imported from their modules on first use.

A package lists its face in ``__all__`` (mypy --strict's and ruff's explicit re-export), imports
it from its own modules for the type checker only (tests/test_layers.py checks that the two
agree), and hands the rest to :func:`export_lazily`::

    __all__ = ["turn_argv", "turn_env"]

    if TYPE_CHECKING:
        from hive.claude._argv import turn_argv, turn_env

    export_lazily(__name__)

:func:`export_lazily` reads where each name lives off those imports (the package's own source,
read once with plain string operations: ``ast`` or a regular expression would cost a cold start
more than all the rest) and imports a name's module only when the name is first used, keeping
it in the package from then on. So ``hive run`` and ``hive-bash-mcp`` pay for no module they do
not use (tests/test_import_costs.py).

:func:`build_on_first_use` is the same for a module's own attributes that are costly to build.

Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from typing import Any

__all__ = ["build_on_first_use", "export_lazily", "exports"]


def _type_checking_block(source: str) -> str:
    """The indented lines under the module's first ``if TYPE_CHECKING:``, joined."""
    lines = source.splitlines()
    try:
        start = lines.index("if TYPE_CHECKING:") + 1
    except ValueError:
        return ""
    block = []
    for line in lines[start:]:
        if line and not line[0].isspace():
            break
        block.append(line.split("#", 1)[0])
    return " ".join(block)


def _homes(package: str, source: str) -> dict[str, tuple[str, str]]:
    """Each name the ``TYPE_CHECKING`` block imports from ``package``'s modules: (module, attribute)."""
    homes: dict[str, tuple[str, str]] = {}
    words = _type_checking_block(source).replace("(", " ").replace(")", " ").replace(",", " , ").split()
    module = None
    for at, word in enumerate(words):
        if word == "from" and at + 1 < len(words):
            module = words[at + 1] if words[at + 1].startswith(f"{package}.") else None
        elif word == "import" and (at < 2 or words[at - 2] != "from"):
            module = None  # a plain `import x`: no export
        elif module is None or word in ("import", ",", "as") or words[at - 1] in ("from", "as"):
            continue
        elif at + 2 < len(words) and words[at + 1] == "as":
            homes[words[at + 2]] = (module, word)
        else:
            homes[word] = (module, word)
    return homes


def exports(package: str, file: str) -> dict[str, tuple[str, str]]:
    """What ``package`` (its ``__name__``; ``file``, its ``__file__``) imports from its own modules
    in its ``if TYPE_CHECKING:`` block: each name, with its module and its name there."""
    with open(file, encoding="utf-8") as source:
        return _homes(package, source.read())


def export_lazily(package: str) -> None:
    """Give ``package`` (its ``__name__``, called from its ``__init__``) a ``__getattr__`` and a
    ``__dir__`` serving each name its ``TYPE_CHECKING`` block imports, imported on first use.

    They are set from here, not assigned in the package, so that the type checker sees no
    catch-all ``__getattr__`` there: a name the package does not export stays an error."""
    module = sys.modules[package]
    assert module.__file__ is not None, package
    homes = exports(package, module.__file__)
    module.__getattr__ = _getattr(package, homes)  # type: ignore[method-assign]
    module.__dir__ = _dir(homes)  # type: ignore[method-assign]


def build_on_first_use(module: str, **builders: Callable[[], Any]) -> None:
    """Give ``module`` (its ``__name__``) a ``__getattr__`` that builds the attributes named in
    ``builders`` by calling them, each time one is asked for (a builder that builds once caches
    itself); declare them under ``if TYPE_CHECKING:`` for the type checker."""

    def __getattr__(name: str) -> Any:
        build = builders.get(name)
        if build is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
        return build()

    sys.modules[module].__getattr__ = __getattr__  # type: ignore[method-assign]


def _getattr(package: str, homes: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}", name=name)
        module, attribute = home
        value = getattr(import_module(module), attribute)
        setattr(sys.modules[package], name, value)  # found in the package from now on
        return value

    return __getattr__


def _dir(homes: Collection[str]) -> Callable[[], list[str]]:
    names = sorted(homes)

    def __dir__() -> list[str]:
        return list(names)

    return __dir__
