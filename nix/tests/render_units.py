"""Write the systemd units an evaluation of nix/module.nix generates, as NixOS would write them,
for `systemd-analyze verify` (nix/tests/verify-units.sh).

    python3 render_units.py EVALUATED.json OUT_DIR STORE_ROOT

EVALUATED.json is nix/tests/eval.nix's output (its ``services``); each becomes OUT_DIR/<name>.service.
Every /nix/store path in them is moved under STORE_ROOT, and each program a unit runs, and each
``bin/`` its PATH names, is made there as a stub executable: systemd checks that they exist.
Standard library only.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

STORE = "/nix/store/"


def unit_text(name: str, service: dict[str, Any]) -> str:
    """The unit file NixOS writes for ``service`` (its [Unit], [Service] and [Install] sections)."""
    unit = [f"Description={service['description']}"] if service.get("description") else []
    for key, field in (
        ("After", "after"),
        ("Before", "before"),
        ("Requires", "requires"),
        ("Wants", "wants"),
        ("BindsTo", "bindsTo"),
        ("PartOf", "partOf"),
        ("Conflicts", "conflicts"),
    ):
        if service.get(field):
            unit.append(f"{key}={' '.join(service[field])}")
    unit += [f"{key}={_value(value)}" for key, value in sorted(service.get("unitConfig", {}).items())]
    if service.get("restartTriggers"):
        unit.append(f"X-Restart-Triggers={len(service['restartTriggers'])} trigger(s)")
    environment = dict(service.get("environment", {}))
    paths = service.get("path", [])
    if paths:
        environment["PATH"] = ":".join([f"{p}/bin" for p in paths] + [f"{p}/sbin" for p in paths])
    lines = ["[Unit]", *unit, "", "[Service]"]
    # As NixOS writes them: each `KEY=value` a JSON string (its quotes and backslashes escaped).
    lines += [f"Environment={json.dumps(f'{key}={value}')}" for key, value in sorted(environment.items())]
    for key, value in sorted(service.get("serviceConfig", {}).items()):
        for one in value if isinstance(value, list) else [value]:
            lines.append(f"{key}={_value(one)}")
    if service.get("wantedBy") or service.get("requiredBy"):
        lines += ["", "[Install]"]
        if service.get("wantedBy"):
            lines.append(f"WantedBy={' '.join(service['wantedBy'])}")
        if service.get("requiredBy"):
            lines.append(f"RequiredBy={' '.join(service['requiredBy'])}")
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def stubs(text: str) -> list[str]:
    """The store paths a unit needs to exist: the programs it runs and its PATH's directories."""
    needed = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key in ("ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload"):
            program = shlex.split(value)[0].lstrip("@-:+!")
            needed.append(program)
    return needed


def main(evaluated: Path, out: Path, root: Path) -> None:
    services = json.loads(evaluated.read_text())["services"]
    out.mkdir(parents=True, exist_ok=True)
    for name, service in sorted(services.items()):
        text = unit_text(name, service).replace(STORE, f"{root}{STORE}")
        (out / f"{name}.service").write_text(text)
        for program in stubs(text):
            path = Path(program)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("#!/bin/sh\nexit 0\n")
            path.chmod(0o755)
        for directory in (p for p in service.get("path", []) if p.startswith(STORE)):
            os.makedirs(f"{root}{directory}/bin", exist_ok=True)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
