"""Checks nix/pypi.nix against PyPI: every pinned sdist is downloaded from the address PyPI's
index gives for the file fetchPypi asks for, and its SHA-256, name, version, build system,
module and runtime requirements (Requires-Dist for Linux, no extras) must be what the pin says.

    .venv/bin/python nix/tests/pypi-pins.py        needs nix-instantiate and PyPI

Ends with `N passed, N failed`; exits 1 if anything failed, 2 if it could not check at all.
``HIVE_PYPI_SIMPLE`` names another PEP 503 index (default https://pypi.org/simple).
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import html.parser
import io
import json
import os
import subprocess
import sys
import tarfile
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PINS = Path(__file__).resolve().parent.parent / "pypi.nix"
INDEX = os.environ.get("HIVE_PYPI_SIMPLE", "https://pypi.org/simple").rstrip("/")
PYTHONS = ("3.11", "3.12", "3.13", "3.14")


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            path = urllib.parse.urlsplit(href).path
            self.links[path.rsplit("/", 1)[-1]] = href


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as answer:
        data: bytes = answer.read()
        return data


def linux_requirements(metadata: email.message.Message) -> set[str]:
    """Requires-Dist that applies on Linux CPython, on any Python hive supports, with no extras."""
    found = set()
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        for version in PYTHONS:
            environment = {
                "python_version": version,
                "python_full_version": f"{version}.0",
                "sys_platform": "linux",
                "platform_system": "Linux",
                "os_name": "posix",
                "platform_python_implementation": "CPython",
                "implementation_name": "cpython",
                "extra": "",
            }
            if requirement.marker is None or requirement.marker.evaluate(environment):
                requirement.marker = None
                found.add(str(requirement))
                break
    return found


def read(archive: tarfile.TarFile, member: str) -> str:
    file = archive.extractfile(member)
    if file is None:
        raise KeyError(f"{member} is not a file")
    return file.read().decode()


def check(name: str, pin: dict[str, Any]) -> list[str]:
    """What is wrong with one pin (nothing: an empty list)."""
    version, sdist = str(pin["version"]), str(pin["sdist"])
    wanted = f"{sdist}-{version}.tar.gz"  # the file name fetchPypi builds its address from
    index = _Links()
    index.feed(fetch(f"{INDEX}/{canonicalize_name(name)}/").decode())
    if wanted not in index.links:
        sdists = sorted(f for f in index.links if f.endswith(f"-{version}.tar.gz"))
        return [
            f"PyPI has no {wanted} (fetchPypi's pname is the sdist's prefix); for {version} it has {sdists}"
        ]
    href = index.links[wanted]
    data = fetch(urllib.parse.urljoin(f"{INDEX}/{name}/", href.split("#", 1)[0]))
    problems = []
    digest = "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()
    if digest != pin["hash"]:
        problems.append(f"{wanted} is {digest}, the pin says {pin['hash']}")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        top = f"{sdist}-{version}"
        metadata = email.parser.Parser().parsestr(read(archive, f"{top}/PKG-INFO"))
        pyproject = tomllib.loads(read(archive, f"{top}/pyproject.toml"))
        members = set(archive.getnames())
    if canonicalize_name(metadata["Name"]) != name or metadata["Version"] != version:
        problems.append(f"its PKG-INFO says {metadata['Name']} {metadata['Version']}")
    build = sorted(canonicalize_name(Requirement(r).name) for r in pyproject["build-system"]["requires"])
    if build != sorted(pin["build-system"]):
        problems.append(f"its pyproject.toml builds with {build}, the pin says {pin['build-system']}")
    module = str(pin["imports"])
    if not any(m.endswith(f"/{module}/__init__.py") for m in members):
        problems.append(f"it has no package {module}/ to import")
    requires = linux_requirements(metadata)
    pinned = {str(Requirement(r)) for r in pin["requires"]}
    if requires != pinned:
        problems.append(
            f"its Requires-Dist for Linux is {sorted(requires)}; the pin lacks {sorted(requires - pinned)}"
            f" and has beyond it {sorted(pinned - requires)}"
        )
    return problems


def main() -> int:
    try:
        pins = json.loads(
            subprocess.run(
                ["nix-instantiate", "--eval", "--strict", "--json", str(PINS)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"pypi-pins.py: cannot read {PINS} with nix-instantiate: {error}", file=sys.stderr)
        return 2
    passed = failed = 0
    for name, pin in sorted(pins.items()):
        what = f"{name} {pin['version']}: the sdist PyPI serves is the one pinned"
        try:
            problems = check(name, pin)
        except (OSError, KeyError) as error:  # urllib's URLError and HTTPError are OSErrors
            problems = [f"could not fetch or read it from {INDEX}: {error}"]
        if problems:
            failed += 1
            print(f"FAIL  {what}")
            for problem in problems:
                print(f"      {problem}")
        else:
            passed += 1
            print(f"ok    {what}")
    print(f"\n{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
