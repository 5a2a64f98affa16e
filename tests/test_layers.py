"""The package layers of DESIGN.md, checked on the source: lower layers never import higher ones."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive._lazy import exports

HIVE = Path(__file__).resolve().parent.parent / "hive"

# What each part of hive may import from hive itself (the package root holds only __version__).
LEAVES = {
    "errors",
    "_files",
    "_main",
    "_proc",
    "_lines",
    "_state_dir",
    "_limits",
    "_lazy",
    "_arguments",
    "_convert",
    "_flags",
    "_text_input",
    "_when",
    "_signals",
    "_sentinel",
    "_spawn",
}
"""The shared mechanisms (hive/_*.py, hive/errors.py): each imports only leaves, and every part may import them."""

ALLOWED: dict[str, set[str]] = {
    "__init__": set(),
    **{leaf: LEAVES for leaf in LEAVES},
    "sink": {"sink"} | LEAVES,
    "runtime": {"runtime", "sink"} | LEAVES,
    "claude": {"claude", "runtime", "sink"} | LEAVES,
    "acp": {"acp", "runtime", "sink", ""} | LEAVES,
    "_unix": LEAVES,
    "agent_socket": {"_unix"} | LEAVES,
    "sdnotify": LEAVES,
    "telemetry": {"telemetry", "runtime", "sink", ""} | LEAVES,
    # The daemon kit: MCP on a Unix socket, for every daemon; it knows none of them.
    "daemon": {"daemon", "agent_socket", "_unix", ""} | LEAVES,
    "bash": {"bash", "daemon", "agent_socket", "sdnotify", "_unix", "telemetry", ""} | LEAVES,
    "agent": {
        *("agent", "bash", "daemon", "runtime", "sink", "agent_socket", "sdnotify", "_unix", "telemetry", ""),
    }
    | LEAVES,
    "subagent": {
        "subagent",
        "daemon",
        "runtime",
        "sink",
        "agent_socket",
        "sdnotify",
        "_unix",
        "telemetry",
        "",
    }
    | LEAVES,
    "_hive_run_turn": {"runtime", "sink", "telemetry", ""} | LEAVES,
    "hive_run": {"_hive_run_turn", "runtime", "sink", "telemetry", ""} | LEAVES,
    "demo_agent": {""} | LEAVES,
    "demo": {"agent", "bash", "agent_socket", "sdnotify", "_unix", ""} | LEAVES,
    "fleet": {"fleet", "agent", "bash", "subagent", "agent_socket", "_unix", ""} | LEAVES,
    "cli": {
        *(
            "hive_run",
            "_hive_run_turn",
            "demo",
            "agent",
            "bash",
            "subagent",
            "claude",
            "acp",
            "runtime",
            "sink",
            "fleet",
        ),
        *("agent_socket", "sdnotify", "_unix", "telemetry", ""),
    }
    | LEAVES,
}
SHARED_LEAVES: dict[str, set[str]] = {
    "_limits": set(),
    "_lazy": set(),
    "_convert": {"errors", "_when"},
    "_arguments": {"_limits", "errors", "_when"},
    "_inotify": set(),
    "_follow": {"_files", "_inotify", "errors"},
    "_outage": set(),
}
"""One mechanism each, for every part: they import nothing of hive above them, and nothing
outside the standard library but ``_convert``'s cattrs and ``_inotify``'s Trio."""
for _imports in ALLOWED.values():
    if _imports:  # the leaves that import nothing of hive (errors, _files, sdnotify) stay so
        _imports |= set(SHARED_LEAVES)
ALLOWED.update(SHARED_LEAVES)


def part_of(path: Path) -> str:
    relative = path.relative_to(HIVE)
    return relative.parts[0].removesuffix(".py")


def imported_names(path: Path, *, members: bool = False) -> Iterator[str]:
    """The modules ``path`` imports by absolute name; with ``members``, also each name taken from
    one (``from hive.bash import _procs`` gives ``hive.bash._procs``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            if members:
                yield from (f"{node.module}.{alias.name}" for alias in node.names)


def hive_imports(path: Path) -> set[str]:
    """The parts of hive that ``path`` imports (``""`` for the package root)."""
    names = set(imported_names(path))
    return {name.split(".")[1] for name in names if name.startswith("hive.")} | (
        {""} if "hive" in names else set()
    )


def test_every_module_keeps_to_its_layer() -> None:
    checked = 0
    for path in sorted(HIVE.rglob("*.py")):
        part = part_of(path)
        assert part in ALLOWED, f"{path.relative_to(HIVE)} has no layer: give {part!r} one in ALLOWED"
        stray = hive_imports(path) - ALLOWED[part] - {part}
        assert not stray, f"{path.relative_to(HIVE)} imports hive.{sorted(stray)}"
        checked += 1
    assert checked >= 10


def private_imports(path: Path) -> set[str]:
    """The private modules of hive's packages (``hive.<package>._<module>``) that ``path`` imports,
    by their full names (``from hive.bash import _procs`` is ``hive.bash._procs``)."""
    found = set()
    for name in imported_names(path, members=True):
        parts = name.split(".")
        if parts[0] == "hive" and len(parts) > 2 and parts[2].startswith("_"):
            found.add(".".join(parts[:3]))
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    """What a package offers the others is its face (its ``__init__``) and its public modules."""
    strays = [
        f"{path.relative_to(HIVE)} imports {name}"
        for path in sorted(HIVE.rglob("*.py"))
        for name in sorted(private_imports(path))
        if name.split(".")[1] != part_of(path)
    ]
    assert not strays, strays
    assert private_imports(HIVE / "bash" / "_task_manager.py"), (
        "the check sees a package's own private imports"
    )


def imported_roots(path: Path, *, on_import: bool = False) -> set[str]:
    """The top-level packages ``path`` imports, and the hive modules by their full names.

    With ``on_import``, only what importing the module runs: its top-level statements, not
    functions' own imports nor ``if TYPE_CHECKING:`` blocks.
    """
    tree = ast.parse(path.read_text())
    nodes = tree.body if on_import else list(ast.walk(tree))
    names = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    names |= {
        node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    return {name if name.startswith("hive") else name.split(".")[0] for name in names} - {"__future__"}


STDLIB_LEAVES = {
    *("hive.errors", "hive._main", "hive._limits", "hive._lazy", "hive._arguments", "hive._flags"),
    *("hive._outage", "hive._when", "hive.daemon.protocol"),
}
"""hive's modules that import nothing but the standard library (and one another): a program
that must start in the time of a bare interpreter may still use them."""


def test_the_stdlib_leaves_import_only_the_standard_library() -> None:
    allowed = set(sys.stdlib_module_names) | STDLIB_LEAVES
    for name in STDLIB_LEAVES:
        imported = imported_roots(HIVE / f"{name.removeprefix('hive.').replace('.', '/')}.py")
        assert imported <= allowed, (name, imported - allowed)


RELAYS = {"hive.daemon.relay", "hive.subagent._start"}
"""The kit's relay, and how the subagent relay starts its daemon (what it imports beyond the
standard library, only when it starts one)."""


@pytest.mark.parametrize("module", ["daemon/relay", "bash/relay", "subagent/relay", "subagent/_start"])
def test_the_relay_imports_only_the_standard_library(module: str) -> None:
    """The relays start in the time of a bare interpreter: the standard library, and the limits
    they share with the tools (a module of the standard library only)."""
    imported = imported_roots(HIVE / f"{module}.py", on_import=module == "subagent/_start")
    allowed = set(sys.stdlib_module_names) | STDLIB_LEAVES | RELAYS | {"hive"}  # the root: only __version__
    assert imported <= allowed, imported - allowed


def test_the_cli_client_imports_only_the_standard_library() -> None:
    """`hive bash` must start fast: its client speaks MCP itself, without the SDK, and imports
    Trio only in the functions of its Trio flavour."""
    imported = imported_roots(HIVE / "bash" / "client.py", on_import=True)
    allowed = set(sys.stdlib_module_names) | {
        "hive",
        "hive.bash._errors",
        "hive._lines",
        "hive.daemon.protocol",
    }
    assert imported <= allowed, imported - allowed
    assert imported_roots(HIVE / "bash" / "_errors.py") <= set(sys.stdlib_module_names) | STDLIB_LEAVES


def test_every_lazy_face_lists_in_all_exactly_what_it_imports_for_the_type_checker() -> None:
    """A package's face is named in its TYPE_CHECKING imports and in __all__ (hive._lazy)."""
    faces = [path for path in sorted(HIVE.rglob("__init__.py")) if "export_lazily(" in path.read_text()]
    assert len(faces) >= 5
    for path in faces:
        name = ".".join(("hive", *path.parent.relative_to(HIVE).parts))
        package = importlib.import_module(name)
        assert sorted(exports(name, str(path))) == sorted(package.__all__), name
        assert dir(package) == sorted(package.__all__), name
        for export in package.__all__:
            assert getattr(package, export) is getattr(package, export), (name, export)


def test_the_line_reader_and_the_errors_are_light_leaves() -> None:
    allowed_leaf = set(sys.stdlib_module_names) | {"hive.errors"}
    assert imported_roots(HIVE / "_lines.py", on_import=True) <= allowed_leaf
    assert imported_roots(HIVE / "errors.py") <= set(sys.stdlib_module_names)


def run_time_imports(path: Path) -> set[str]:
    """The hive modules ``path`` imports when it runs, anywhere in it (functions' own imports too;
    not ``if TYPE_CHECKING:`` blocks), by their full names."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            pending += node.orelse
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        pending += ast.iter_child_nodes(node)
    return {name for name in found if name.startswith("hive.")}


@pytest.mark.parametrize("package", ["telemetry"])
def test_no_modules_of_a_package_import_one_another_in_a_circle(package: str) -> None:
    """Where nothing is exported, telemetry's front imports nothing above it; its setup and
    spans are imported from above, never back (issue 40)."""
    modules = {f"hive.{package}.{path.stem}": path for path in (HIVE / package).glob("_*.py")}
    graph = {name: run_time_imports(path) & set(modules) for name, path in modules.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), list(graph[start])
        while todo:
            if (name := todo.pop()) not in seen:
                seen.add(name)
                todo += graph[name]
        return seen

    circles = sorted(name for name in graph if name in reach(name))
    assert not circles, circles
