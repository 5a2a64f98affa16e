"""Whether telemetry is exported, and where to: the standard ``OTEL_*`` environment, read once.

hive has no flag of its own for it. Traces go out where ``OTEL_TRACES_EXPORTER`` names an
exporter (``otlp``, ``console``), metrics where ``OTEL_METRICS_EXPORTER`` does; unset (or
``none``) means none, whatever OpenTelemetry's own default. The OTLP exporter reads
``OTEL_EXPORTER_OTLP_ENDPOINT`` and the rest itself, ``OTEL_EXPORTER_OTLP_PROTOCOL`` picks
``http/protobuf`` (the default here, what ``hive[otel]`` installs) or ``grpc``; the resource
reads ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``.

Where nothing is to be exported, nothing of OpenTelemetry is imported and `active` is None:
the callers skip every span and measurement, and a turn costs what it did without them.
Exports run in the SDK's own threads (a batch of spans, a metric reading a minute), so a slow
or unreachable collector never holds a turn up; it is logged once (`_OnceHandler`). The last
exports at a stop are waited for `FLUSH_MILLIS` in all (`_within`), however long the exporters'
own timeouts; the console exporters write to stderr, never into a program's output.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hive._when import in_seconds
from hive.errors import BadInput
from hive.telemetry._ids import PresetIds
from hive.telemetry._state import METRICS, TRACES, exporters, set_active

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

    from hive.telemetry._instruments import Instruments

log = logging.getLogger("hive.telemetry")

FLUSH_MILLIS = 5000
"""How long a clean stop waits for the last exports, in all."""


class TelemetryError(BadInput):
    """An ``OTEL_*`` variable names what hive cannot export with (a bad setting: exit 2)."""


@attrs.define(eq=False)
class Telemetry:
    """The tracer and the instruments every span and measurement of this process goes through."""

    tracer: Tracer
    meter: Meter
    instruments: Instruments
    ids: PresetIds
    _stop: Callable[[], None]
    _flush: Callable[[], bool]

    def shutdown(self) -> None:
        """Export what is left and stop the exporters, waiting at most `FLUSH_MILLIS` (blocking);
        what is not exported by then is dropped."""
        if not _within(FLUSH_MILLIS / 1000, self._stop):
            log.warning(
                "telemetry: the last exports did not finish within %s; what was left is dropped",
                in_seconds(FLUSH_MILLIS / 1000),
            )

    def flush(self) -> bool:
        """Export the spans ended so far now, waiting at most `FLUSH_MILLIS` (blocking); whether
        it was done in time."""
        done: list[bool] = []
        return _within(FLUSH_MILLIS / 1000, lambda: done.append(self._flush())) and done == [True]


def _within(seconds: float, work: Callable[[], object]) -> bool:
    """Do ``work`` in a thread of its own, waiting for it at most ``seconds``; whether it was done.
    The SDK bounds neither a flush nor an exporter's request by the time it is given: a
    collector that never answers holds ``work``, not the caller (nor the process's exit: the
    thread is a daemon)."""
    thread = threading.Thread(target=work, name="hive-telemetry-stop", daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def install(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, ids: PresetIds | None = None
) -> Telemetry:
    """Export through these providers from now on (`configure` builds them from the environment;
    tests pass the SDK's in-memory readers)."""
    from hive import __version__
    from hive.telemetry._instruments import Instruments

    meter = meter_provider.get_meter("hive", __version__)

    def stop() -> None:
        for provider in (tracer_provider, meter_provider):
            flush: Any = getattr(provider, "force_flush", None)
            if flush is not None:
                flush(FLUSH_MILLIS)
            shutdown: Any = getattr(provider, "shutdown", None)
            if shutdown is not None:
                shutdown()

    def flush() -> bool:
        force: Any = getattr(tracer_provider, "force_flush", None)
        return bool(force(FLUSH_MILLIS)) if force is not None else True

    telemetry = Telemetry(
        tracer_provider.get_tracer("hive", __version__),
        meter,
        Instruments.create(meter),
        ids or PresetIds(),
        stop,
        flush,
    )
    set_active(telemetry)
    return telemetry


def uninstall() -> None:
    """Export nothing from now on (what is still buffered is the caller's to flush)."""
    set_active(None)


def check(environ: Mapping[str, str] = os.environ) -> None:
    """What `configure` would refuse, found without importing OpenTelemetry: a `TelemetryError`."""
    import importlib.util

    traces, metrics = exporters(environ, TRACES), exporters(environ, METRICS)
    for variable, names, kind in ((TRACES, traces, "traces"), (METRICS, metrics, "metrics")):
        for name in names:
            if name not in ("otlp", "console"):
                raise TelemetryError(
                    f"{variable}={name!r}: hive exports {kind} with otlp or console (or none)"
                )
    if not traces and not metrics:
        return
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise _no_sdk(TRACES if traces else METRICS)
    if "otlp" in traces + metrics:
        protocol = _protocol(environ)
        transport = "grpc" if protocol == "grpc" else "http"
        if importlib.util.find_spec(f"opentelemetry.exporter.otlp.proto.{transport}") is None:
            raise _no_exporter(protocol)


def _no_sdk(variable: str) -> TelemetryError:
    return TelemetryError(
        f"{variable} asks for telemetry, but the OpenTelemetry SDK is not installed: install "
        "hive[otel] (pip install 'hive[otel]'), or unset it"
    )


def _no_exporter(protocol: str) -> TelemetryError:
    package = "opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else "hive[otel]"
    return TelemetryError(f"the OTLP exporter for {protocol} is not installed: install {package}")


def configure(service: str, environ: Mapping[str, str] = os.environ) -> Telemetry | None:
    """Set up the exports the environment asks for, as ``service`` where ``OTEL_SERVICE_NAME``
    names none; None where it asks for none. A name hive cannot export with, or an SDK that is
    not installed, is a `TelemetryError` that says what to do."""
    traces, metrics = exporters(environ, TRACES), exporters(environ, METRICS)
    if not traces and not metrics:
        return None
    check(environ)
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise _no_sdk(TRACES if traces else METRICS) from None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    protocol = _protocol(environ)
    ids = PresetIds()
    # Not stopped at exit by the SDK (without a bound): by `Telemetry.shutdown`.
    tracer_provider = TracerProvider(
        resource=resource,
        id_generator=ids,  # type: ignore[arg-type]
        shutdown_on_exit=False,
    )
    for name in traces:
        tracer_provider.add_span_processor(BatchSpanProcessor(_exporter("traces", name, protocol)))
    readers = [PeriodicExportingMetricReader(_exporter("metrics", name, protocol)) for name in metrics]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    _log_export_failures_once()
    return install(tracer_provider, meter_provider, ids)


def _protocol(environ: Mapping[str, str]) -> str:
    protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip().lower() or "http/protobuf"
    if protocol not in ("http/protobuf", "grpc"):
        raise TelemetryError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: hive exports with http/protobuf or grpc"
        )
    return protocol


_EXPORTERS = {
    "traces": (TRACES, "sdk.trace.export.ConsoleSpanExporter", "trace_exporter.OTLPSpanExporter"),
    "metrics": (METRICS, "sdk.metrics.export.ConsoleMetricExporter", "metric_exporter.OTLPMetricExporter"),
}
"""Each signal's variable, its console exporter and its OTLP exporter (below ``opentelemetry.``
and ``opentelemetry.exporter.otlp.proto.<transport>.``)."""


def _exporter(signal: str, name: str, protocol: str) -> Any:
    """The exporter ``name`` (otlp or console) for ``signal`` (traces or metrics)."""
    variable, console, otlp = _EXPORTERS[signal]
    if name == "console":
        return _new("opentelemetry." + console, out=sys.stderr)
    if name != "otlp":
        raise TelemetryError(f"{variable}={name!r}: hive exports {signal} with otlp or console (or none)")
    # grpc's exporters are not in hive[otel].
    transport = "grpc" if protocol == "grpc" else "http"
    try:
        return _new(f"opentelemetry.exporter.otlp.proto.{transport}.{otlp}")
    except ImportError:
        raise _no_exporter(protocol) from None


def _new(path: str, **arguments: Any) -> Any:
    """An instance, made with ``arguments``, of the class at ``path`` (``module.Class``)."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**arguments)


class _OnceHandler(logging.Handler):
    """The SDK's and exporters' own complaints (one a failed export, every few seconds while a
    collector is down), told once through hive's log, then dropped."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.told = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.told:
            return
        self.told = True
        log.warning(
            "telemetry cannot be exported (%s); turns go on, and later failures to export are not logged",
            record.getMessage().splitlines()[0] if record.getMessage() else record.name,
        )


def _log_export_failures_once() -> None:
    otel = logging.getLogger("opentelemetry")
    if not any(isinstance(h, _OnceHandler) for h in otel.handlers):
        otel.addHandler(_OnceHandler())
    otel.propagate = False
