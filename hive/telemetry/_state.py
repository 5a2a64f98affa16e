"""Whether this process exports telemetry: the ``OTEL_*`` environment's answer, read without
importing anything (`wanted`), and the telemetry set up where it does (`active`).

Every caller asks here first, so that where nothing is to be exported a turn, a task or a wake
costs a dictionary lookup: neither OpenTelemetry nor hive's own setup (`hive.telemetry._setup`)
is imported. Standard library only, importing nothing of hive when it runs: the modules above it import the
setup where it is wanted (`hive.telemetry._trace`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hive.telemetry._setup import Telemetry

TRACES = "OTEL_TRACES_EXPORTER"
METRICS = "OTEL_METRICS_EXPORTER"

_active: Telemetry | None = None


def exporters(environ: Mapping[str, str], variable: str) -> list[str]:
    """The exporters ``variable`` names (``none`` and blanks left out)."""
    names = [n.strip().lower() for n in environ.get(variable, "").split(",")]
    return [n for n in names if n and n != "none"]


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for any export."""
    return bool(exporters(environ, TRACES) or exporters(environ, METRICS))


def active() -> Telemetry | None:
    """This process's telemetry; None when nothing is exported."""
    return _active


def set_active(telemetry: Telemetry | None) -> None:
    global _active  # noqa: PLW0603 - the process's one telemetry
    _active = telemetry
