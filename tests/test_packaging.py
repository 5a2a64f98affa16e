"""pyproject.toml in the form setuptools keeps supporting: the licence as an SPDX expression (PEP 639)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
PEP_639_SETUPTOOLS = Version("77")
"""The first setuptools that reads ``license`` as an SPDX expression; it deprecates the table form."""


def test_the_licence_is_an_spdx_expression_and_the_build_reads_it() -> None:
    pyproject = tomllib.loads(PYPROJECT.read_text())
    assert pyproject["project"]["license"] == "MIT"
    (setuptools,) = [
        Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")
    ]
    assert not setuptools.specifier.contains("76.1")
    assert setuptools.specifier.contains(str(PEP_639_SETUPTOOLS))


def test_the_installed_metadata_states_the_licence_expression() -> None:
    metadata = importlib.metadata.metadata("hive")
    assert metadata["License-Expression"] == "MIT", (
        "the installed metadata is older than pyproject.toml: run `pip install -e '.[test]'` again"
    )
    assert metadata["License"] is None
