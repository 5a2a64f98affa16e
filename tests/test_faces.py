"""Each package's face (what its ``__all__`` offers the rest of hive) says what it is: a docstring
on every class and function it exports, and on every public method and property of those classes."""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest

FACES = (
    "hive.runtime",
    "hive.sink",
    "hive.claude",
    "hive.acp",
    "hive.bash",
    "hive.agent",
    "hive.subagent",
    "hive.agent_socket",
    "hive.telemetry",
    "hive.fleet",
)


def _documented(obj: object) -> bool:
    return bool((getattr(obj, "__doc__", None) or "").strip())


def _function_of(member: object) -> object:
    """The function behind a class attribute: a method's, a property's getter."""
    if isinstance(member, staticmethod | classmethod):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    return member


def undocumented(face: str) -> list[str]:
    """The names on ``face`` that lack a docstring (a class's own, not one it inherits)."""
    module = importlib.import_module(face)
    missing = []
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            if not (value.__dict__.get("__doc__") or "").strip():
                missing.append(name)
            missing += [
                f"{name}.{attribute}"
                for attribute, member in value.__dict__.items()
                if not attribute.startswith("_")
                and inspect.isfunction(function := _function_of(member))
                and not _documented(function)
            ]
        elif inspect.isfunction(value) and not _documented(value):
            missing.append(name)
    return missing


@pytest.mark.parametrize("face", FACES)
def test_every_public_definition_of_a_face_has_a_docstring(face: str) -> None:
    module = importlib.import_module(face)
    assert module.__all__, f"{face} has no __all__"
    assert len(set(module.__all__)) == len(module.__all__), f"{face} lists a name twice"
    assert undocumented(face) == []


def test_the_check_sees_what_lacks_a_docstring(monkeypatch: pytest.MonkeyPatch) -> None:
    class Documented:
        """Documented."""

        def method(self) -> None:
            pass

        @property
        def value(self) -> int:
            return 0

        def _private(self) -> None:
            pass

    class Bare:
        pass

    def function() -> None:
        pass

    probe = types.ModuleType("hive_face_probe")
    probe.__dict__.update(
        __all__=["Documented", "Bare", "function"], Documented=Documented, Bare=Bare, function=function
    )
    monkeypatch.setitem(sys.modules, "hive_face_probe", probe)
    assert undocumented("hive_face_probe") == ["Documented.method", "Documented.value", "Bare", "function"]
