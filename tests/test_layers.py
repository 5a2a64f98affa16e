"""The package layers of DESIGN.md, checked on the source: lower layers never import higher ones."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HIVE = Path(__file__).resolve().parent.parent / "hive"

# What each part of hive may import from hive itself (the package root holds only __version__).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_files": set(),
    "_proc": set(),
    "_lines": {"errors"},
    "_state_dir": {"_files", "errors"},
    "sink": {"sink", "_proc", "_lines", "_files", "errors"},
    "runtime": {"runtime", "sink", "_proc", "_lines", "_files", "errors"},
    "claude": {"claude", "runtime", "sink", "_proc", "_lines", "_files", "errors"},
    "acp": {"acp", "runtime", "sink", "_proc", "_lines", "_files", "errors", ""},
    "_unix": {"_proc", "_lines", "_files", "errors"},
    "wake": {"_unix", "_proc", "_lines", "_files", "errors"},
    "sdnotify": {"_proc", "_lines"},
    "bash": {"bash", "wake", "sdnotify", "_unix", "_proc", "_lines", "_state_dir", "_files", "errors", ""},
    "agent": {
        "agent",
        "bash",
        "runtime",
        "sink",
        "wake",
        "sdnotify",
        "_unix",
        "_proc",
        "_lines",
        "_state_dir",
        "_files",
        "errors",
        "",
    },
    "subagent": {
        "subagent",
        "runtime",
        "sink",
        "wake",
        "sdnotify",
        "_unix",
        "_proc",
        "_lines",
        "_state_dir",
        "_files",
        "errors",
        "",
    },
}


def part_of(path: Path) -> str:
    relative = path.relative_to(HIVE)
    return relative.parts[0].removesuffix(".py")


def hive_imports(path: Path) -> set[str]:
    """The parts of hive that ``path`` imports (``""`` for the package root)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if name == "hive":
                found.add("")
            elif name.startswith("hive."):
                found.add(name.split(".")[1])
    return found


def test_every_module_keeps_to_its_layer() -> None:
    checked = 0
    for path in sorted(HIVE.rglob("*.py")):
        part = part_of(path)
        if part not in ALLOWED:
            continue
        stray = hive_imports(path) - ALLOWED[part] - {part}
        assert not stray, f"{path.relative_to(HIVE)} imports hive.{sorted(stray)}"
        checked += 1
    assert checked >= 10


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


def test_the_relay_imports_only_the_standard_library() -> None:
    imported = imported_roots(HIVE / "bash" / "relay.py")
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_cli_client_imports_only_the_standard_library() -> None:
    """`hive bash` must start fast: its client speaks MCP itself, without the SDK, and imports
    Trio only in the functions of its Trio flavour."""
    imported = imported_roots(HIVE / "bash" / "client.py", on_import=True)
    allowed = set(sys.stdlib_module_names) | {"hive", "hive.bash._errors", "hive._lines"}
    assert imported <= allowed, imported - allowed
    assert imported_roots(HIVE / "bash" / "_errors.py") <= set(sys.stdlib_module_names)
    allowed_leaf = set(sys.stdlib_module_names) | {"hive.errors"}
    assert imported_roots(HIVE / "_lines.py", on_import=True) <= allowed_leaf
    assert imported_roots(HIVE / "errors.py") <= set(sys.stdlib_module_names)
