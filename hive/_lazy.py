"""Lazy exports: a package's face whose names are imported from their modules on first use.

A package lists its face once for the type checker, in ``if TYPE_CHECKING:`` imports from its
own modules, and once in ``__all__`` (mypy --strict's explicit re-export), then::

    __getattr__, __dir__ = lazy_exports(__name__, __file__, __all__)

:func:`lazy_exports` reads where each name lives off those ``TYPE_CHECKING`` imports (the
package's own source, read once with plain string operations: ``ast`` or a regular expression
would cost a cold start more than all the rest), refuses a face whose two lists disagree, and imports a
name's module only when the name is first used, keeping it in the package from then on. So
``hive run`` and ``hive-bash-mcp`` pay for no module they do not use (tests/test_import_costs.py).

:func:`built_on_first_use` is the same for a module's own attributes that are costly to build.

Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from importlib import import_module
from typing import Any

__all__ = ["built_on_first_use", "lazy_exports"]


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


def lazy_exports(
    package: str, file: str, exports: Collection[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``; ``file`` its
    ``__file__``) whose ``__all__`` is ``exports``, each imported in its ``TYPE_CHECKING`` block."""
    with open(file, encoding="utf-8") as source:
        homes = _homes(package, source.read())
    if set(homes) != set(exports):
        only_imported, only_listed = sorted(set(homes) - set(exports)), sorted(set(exports) - set(homes))
        raise ImportError(
            f"{package}: its TYPE_CHECKING imports and __all__ disagree (imported only: {only_imported}; "
            f"in __all__ only: {only_listed}); name each export in both",
            name=package,
        )
    return _getattr(package, homes), _dir(exports)


def built_on_first_use(module: str, builders: Mapping[str, Callable[[], Any]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module`` whose attributes named in ``builders`` are built by them
    on first use (each builder is called every time: one that builds once caches itself)."""

    def __getattr__(name: str) -> Any:
        build = builders.get(name)
        if build is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
        return build()

    return __getattr__


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


def _dir(exports: Collection[str]) -> Callable[[], list[str]]:
    names = sorted(exports)

    def __dir__() -> list[str]:
        return list(names)

    return __dir__
