"""OpenTelemetry: turns as ``invoke_agent`` spans with their ``execute_tool`` children, bash tasks
as spans whose wakes link the turns they start, the metrics, and the ``OTEL_*`` environment.

The spans and metrics are read from the SDK's in-memory exporter and reader, the turns fed with
real claude streams (fixtures/claude_samples) in-process; one ``hive run`` exports over OTLP/HTTP
to a receiver in the test, against the fake claude, which records the TRACEPARENT it was given."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from fixtures import fake_claude
from hive import telemetry
from hive.agent import Arrived, ItemKind, Phase
from hive.agent_socket import Wake, send_wake
from hive.bash import DaemonProcess
from hive.runtime import AgentUnavailable, StopReason, TurnOutcome, added_environment
from hive.sink import Batch, MemorySink, SessionCost
from hive.telemetry import PresetIds, TelemetryError
from hive.telemetry._setup import FLUSH_MILLIS
from tests.helpers.agent_loop import ScriptedRuntime, serving
from tests.helpers.claude_fake import FakeClaude
from tests.helpers.daemon import DaemonHandle
from tests.helpers.harness import claude_env, running_agent
from tests.helpers.listener import AgentListener
from tests.helpers.tools import serving_tools

SAMPLES = Path(fake_claude.__file__).parent / "claude_samples"
GUARD = 30


class Exported:
    """What the SDK's in-memory exporter and reader hold."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.tracer_provider = TracerProvider(id_generator=PresetIds())  # type: ignore[arg-type]
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics
            if m.name == metric
            for point in m.data.data_points
        ]


@pytest.fixture
def exported() -> Iterator[Exported]:
    found = Exported()
    telemetry.install(found.tracer_provider, found.meter_provider)
    try:
        yield found
    finally:
        telemetry.uninstall()
        found.tracer_provider.shutdown()
        found.meter_provider.shutdown()


def _sample(name: str) -> Batch:
    return Batch((SAMPLES / name).read_bytes())


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _hex(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _outcome(reason: StopReason = StopReason.COMPLETED, *, error: bool = False) -> TurnOutcome:
    return TurnOutcome(reason, "s-1", error, errors=("it went wrong",) if error else ())


async def _turn(batches: Sequence[Batch], outcome: TurnOutcome | None = None, **how: Any) -> MemorySink:
    sink = MemorySink()
    how.setdefault("provider", "anthropic")
    with telemetry.traced_turn("builder", **how) as trace:
        traced = trace.sink(sink)
        for batch in batches:
            await traced.write(batch)
        if outcome is not None:
            trace.ended(outcome)
    return sink


# -- turns ------------------------------------------------------------------------------------------


async def test_a_claude_turn_is_an_invoke_agent_span_with_a_child_per_tool_call(exported: Exported) -> None:
    wake = telemetry.traceparent(0xABC, 0xDEF)
    sink = await _turn(
        [_sample("02_tool_turn_with_partial_messages.jsonl")],
        _outcome(),
        number=3,
        trigger="bash-task-build",
        links=[wake],
    )
    assert b"".join(b.data for b in sink.batches) == _sample("02_tool_turn_with_partial_messages.jsonl").data
    (turn,) = exported.named("invoke_agent builder")
    attributes = _attributes(turn)
    assert {k: attributes[k] for k in attributes if not k.startswith("gen_ai.usage")} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "builder",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.conversation.id": "s-1",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5",
        "gen_ai.response.finish_reasons": ("end_turn",),
        "hive.hive_run.kind": "turn",
        "hive.hive_run.number": 3,
        "hive.hive_run.trigger": "bash-task-build",
        "hive.hive_run.outcome": "completed",
        "hive.hive_run.cost_usd": attributes["hive.hive_run.cost_usd"],
    }
    result = json.loads(_sample("02_tool_turn_with_partial_messages.jsonl").lines()[-1])
    assert attributes["gen_ai.usage.input_tokens"] == result["usage"]["input_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == result["usage"]["output_tokens"]
    assert attributes["hive.hive_run.cost_usd"] == result["total_cost_usd"] > 0
    assert turn.status.status_code is StatusCode.UNSET
    assert [(f"{link.context.trace_id:x}", f"{link.context.span_id:x}") for link in turn.links] == [
        ("abc", "def")
    ]
    tools = [s for s in exported.spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert tools, "the sample's tool call made no span"
    for tool in tools:
        assert tool.parent is not None and tool.parent.span_id == turn.context.span_id
        assert _attributes(tool)["gen_ai.operation.name"] == "execute_tool"
        assert str(_attributes(tool)["gen_ai.tool.call.id"]).startswith("toolu_")
        assert tool.status.status_code is StatusCode.UNSET
        assert (
            turn.start_time is not None and tool.start_time is not None and tool.start_time >= turn.start_time
        )


def _result_line(session: str, total_cost_usd: float, **usage: int) -> Batch:
    line = {"type": "result", "subtype": "success", "is_error": False, "session_id": session}
    return Batch.of([{**line, "total_cost_usd": total_cost_usd, "usage": usage}])


async def test_a_turns_cost_and_tokens_are_its_own_and_its_input_counts_the_cache(exported: Exported) -> None:
    """The result says what the session has cost so far: each span and the cost metric get what
    the turn added, measured from the session's cost before it (as the harness keeps it)."""
    tokens = {"input_tokens": 3, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 40}
    before = SessionCost()
    for total in (0.25, 0.75, 1.0):
        await _turn([_result_line("s-1", total, **tokens, output_tokens=7)], cost=before)
        before = SessionCost("s-1", total)
    await _turn([_result_line("s-2", 0.5, input_tokens=1, output_tokens=1)], cost=before)  # a new session
    spans = exported.named("invoke_agent builder")
    assert [_attributes(s)["hive.hive_run.cost_usd"] for s in spans] == [0.25, 0.5, 0.25, 0.5]
    (cost,) = exported.points("hive.hive_run.cost")
    assert cost.value == 1.5
    attributes = _attributes(spans[0])
    assert attributes["gen_ai.usage.input_tokens"] == 543
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 500
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 40
    assert attributes["gen_ai.usage.output_tokens"] == 7
    used = {p.attributes["gen_ai.token.type"]: p.sum for p in exported.points("gen_ai.client.token.usage")}
    assert used == {"input": 543 * 3 + 1, "output": 7 * 3 + 1}


async def test_a_text_only_turn_names_the_model_that_answered(exported: Exported) -> None:
    # The answer's model, not the init line's, and from a turn with no tool call.
    text = _sample("01_text_turn.jsonl").data.replace(
        b'"role":"assistant","model":"claude-sonnet-4-5"', b'"role":"assistant","model":"claude-sonnet-4-5-x"'
    )
    assert b'"claude-sonnet-4-5-x"' in text and b'"type":"tool_use"' not in text
    await _turn([Batch(text)], _outcome())
    (turn,) = exported.named("invoke_agent builder")
    attributes = _attributes(turn)
    assert (attributes["gen_ai.request.model"], attributes["gen_ai.response.model"]) == (
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-x",
    )


async def test_a_tool_call_whose_result_is_an_error_or_never_comes_is_an_error_span(
    exported: Exported,
) -> None:
    use = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_late", "name": "Bash", "input": {"command": "sleep 9"}}
            ],
        },
    }
    await _turn([_sample("14_tool_blocked.jsonl"), Batch.of([use])], _outcome(StopReason.CANCELLED))
    by_call = {
        _attributes(s)["gen_ai.tool.call.id"]: s for s in exported.spans.get_finished_spans() if s.parent
    }
    blocked = next(s for call, s in by_call.items() if call != "toolu_late")
    assert blocked.status.status_code is StatusCode.ERROR
    assert blocked.status.description == "the tool's result is an error"
    late = by_call["toolu_late"]
    assert (late.name, late.status.description) == (
        "execute_tool Bash",
        "the turn ended before the tool's result",
    )
    (turn,) = exported.named("invoke_agent builder")
    assert (_attributes(turn)["hive.hive_run.outcome"], turn.status.status_code) == (
        "cancelled",
        StatusCode.ERROR,
    )


async def test_an_acp_turn_is_named_by_the_agent_the_stream_names(exported: Exported) -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": "acp-1",
        "model": "fake-model",
        "agent": {"name": "fake-acp", "version": "1.0"},
        "runtime": "acp",
    }
    await _turn([Batch.of([init])], _outcome(), provider="acp")
    (turn,) = exported.named("invoke_agent builder")
    assert _attributes(turn)["gen_ai.provider.name"] == "fake-acp"
    (duration,) = exported.points("gen_ai.client.operation.duration")
    assert duration.attributes["gen_ai.provider.name"] == "fake-acp"


async def test_a_failed_turn_and_a_stopped_turn_end_their_spans_in_error(exported: Exported) -> None:
    with pytest.raises(AgentUnavailable), telemetry.traced_turn("builder", provider="anthropic"):
        raise AgentUnavailable("no such agent: install it")
    with trio.CancelScope() as scope, telemetry.traced_turn("builder", provider="anthropic"):
        scope.cancel()
        await trio.sleep_forever()
    failed, stopped = exported.named("invoke_agent builder")
    assert (_attributes(failed)["hive.hive_run.outcome"], _attributes(failed)["error.type"]) == (
        "failed",
        "AgentUnavailable",
    )
    assert failed.status.status_code is StatusCode.ERROR
    assert [e.name for e in failed.events] == ["exception"]
    assert (
        _attributes(stopped)["hive.hive_run.outcome"] == "stopped"
        and stopped.status.status_code is StatusCode.ERROR
    )
    turns = {p.attributes["hive.hive_run.outcome"]: p.value for p in exported.points("hive.turns")}
    assert turns == {"failed": 1, "stopped": 1}


async def test_a_compaction_in_the_stream_is_marked(exported: Exported) -> None:
    await _turn([_sample("10_compact_in_print_mode.jsonl")], _outcome(), kind="compact")
    (turn,) = exported.named("invoke_agent builder")
    assert (_attributes(turn)["hive.hive_run.kind"], _attributes(turn)["hive.hive_run.compacted"]) == (
        "compact",
        True,
    )


async def test_the_agents_a_turn_spawns_get_its_traceparent(exported: Exported) -> None:
    assert dict(added_environment()) == {}
    with telemetry.traced_turn("builder", provider="anthropic", parent=telemetry.traceparent(7, 8)):
        given = dict(added_environment())
    (turn,) = exported.named("invoke_agent builder")
    trace_id, span_id = _hex(turn)
    assert given == {"TRACEPARENT": f"00-{trace_id}-{span_id}-01"}
    assert int(trace_id, 16) == 7 and turn.parent is not None and turn.parent.span_id == 8
    assert dict(added_environment()) == {}


async def test_nothing_is_wrapped_or_exported_when_nothing_is_installed() -> None:
    assert telemetry.active() is None
    sink = MemorySink()
    with telemetry.traced_turn("builder", provider="anthropic") as trace:
        assert trace.sink(sink) is sink
        assert dict(added_environment()) == {}


# -- the harness: wakes link turns, compactions, the queue's metrics --------------------------------


async def test_the_harness_links_a_turn_to_the_spans_of_the_wakes_it_carries(
    short_tmp: Path, exported: Exported
) -> None:
    runtime = ScriptedRuntime()
    task_span = telemetry.traceparent(0x1234, 0x5678)
    with trio.fail_after(GUARD):
        async with serving(short_tmp, runtime, name="a1", provider="anthropic") as harness:
            await harness.put(Arrived(ItemKind.WAKE, "bash-task-b", "ended", "b:1", traceparent=task_span))
            await runtime.next_prompt()
            runtime.end()
            await harness.wait_state(lambda s: s.phase is Phase.IDLE and not s.queued)
            await harness.ask_compact("operator")
            await harness.wait_state(lambda s: runtime.compactions == 1 and s.phase is Phase.IDLE)
    first, compaction = exported.named("invoke_agent a1")
    assert _attributes(first)["hive.hive_run.trigger"] == "bash-task-b"
    assert [(link.context.trace_id, link.context.span_id) for link in first.links] == [(0x1234, 0x5678)]
    compacted = _attributes(compaction)
    assert (
        compacted["hive.hive_run.kind"],
        compacted["hive.hive_run.trigger"],
        compacted["hive.hive_run.outcome"],
    ) == (
        "compact",
        "operator",
        "completed",
    )
    assert compaction.status.status_code is StatusCode.UNSET
    wakes = {p.attributes["hive.agent_socket.source"]: p.value for p in exported.points("hive.wakes")}
    assert wakes == {"bash": 1}
    (depth,) = exported.points("hive.queue.depth")
    assert depth.value == 0


# -- bash tasks -------------------------------------------------------------------------------------


async def test_a_bash_task_is_a_span_and_its_wake_carries_it(
    short_tmp: Path, agent: AgentListener, exported: Exported
) -> None:
    with trio.fail_after(GUARD):
        async with agent.serving(), serving_tools(short_tmp, agent_socket=agent.path) as tools:
            for name, cmd in (("ok", "true"), ("bad", "exit 3")):
                result = await tools.call("run", {"cmd": cmd, "name": name, "wait_seconds": 0})
                assert not result.is_error, result.text
            await agent.wait_for(2)
    spans = {_attributes(s)["hive.bash.task.id"]: s for s in exported.named("execute_tool bash")}
    assert _attributes(spans["ok"])["hive.bash.task.state"] == "done"
    assert _attributes(spans["ok"])["hive.bash.task.exit_code"] == 0
    assert spans["ok"].status.status_code is StatusCode.UNSET
    assert _attributes(spans["bad"])["hive.bash.task.exit_code"] == 3
    assert spans["bad"].status.status_code is StatusCode.ERROR
    for wake in agent.wakes:
        task_id = wake.sender.removeprefix("bash-task-")
        trace_id, span_id = _hex(spans[task_id])
        assert wake.traceparent == f"00-{trace_id}-{span_id}-01"
    assert {p.attributes["hive.bash.task.state"]: p.value for p in exported.points("hive.bash.tasks")} == {
        "done": 2
    }
    (running,) = exported.points("hive.bash.running")
    assert running.value == 0
    (latency,) = exported.points("hive.bash.wake.latency")
    assert latency.count == 2
    (duration,) = exported.points("hive.bash.task.duration")
    assert duration.count == 2


# -- the environment ----------------------------------------------------------------------------------


def test_no_exporter_named_means_nothing_is_set_up() -> None:
    assert not telemetry.wanted({})
    assert not telemetry.wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": ""})
    assert telemetry.configure("hive-test", {"OTEL_SERVICE_NAME": "x"}) is None
    assert telemetry.turn_ids({}) is None


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        (
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            "OTEL_TRACES_EXPORTER='zipkin': hive exports traces with otlp or console",
        ),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, "OTEL_METRICS_EXPORTER='prometheus'"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "OTEL_EXPORTER_OTLP_PROTOCOL='http/json': hive exports with http/protobuf or grpc",
        ),
    ],
)
def test_an_exporter_hive_cannot_use_is_a_bad_setting_that_says_so(
    environ: dict[str, str], says: str
) -> None:
    with pytest.raises(TelemetryError, match=says.replace("(", r"\(").replace(")", r"\)")):
        telemetry.configure("hive-test", environ)
    assert telemetry.active() is None


def test_a_turn_under_the_callers_traceparent_stays_in_its_trace() -> None:
    parent = telemetry.traceparent(0xAA, 0xBB)
    ids = telemetry.turn_ids({"OTEL_TRACES_EXPORTER": "otlp", "TRACEPARENT": parent})
    assert ids is not None and ids.trace_id == 0xAA and ids.parent == parent and ids.span_id != 0xBB
    assert telemetry.parse_traceparent("00-zz-11-01") is None
    assert telemetry.agent_name(None, {"HIVE_STATE_DIR": "/srv/agents/reviewer/"}) == "reviewer"
    assert telemetry.agent_name(None, {"HIVE_AGENT_NAME": "ops", "HIVE_STATE_DIR": "/x/y"}) == "ops"


def test_an_unreachable_collector_is_logged_once_and_holds_nothing_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    otel = logging.getLogger("opentelemetry")
    handlers, propagate = list(otel.handlers), otel.propagate
    try:
        with (
            caplog.at_level(logging.WARNING),
            telemetry.exporting("hive-test", {"OTEL_TRACES_EXPORTER": "otlp"}) as t,
        ):
            assert t is not None
            for number in range(3):
                with telemetry.traced_turn("builder", provider="anthropic", number=number):
                    pass
                assert t.flush()  # each batch goes, and fails
    finally:
        otel.handlers[:], otel.propagate = handlers, propagate
    told = [r for r in caplog.records if r.name == "hive.telemetry"]
    assert len(told) == 1, [r.getMessage() for r in caplog.records]
    assert told[0].getMessage().startswith("telemetry cannot be exported (")
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


# -- end to end: hive run exports over OTLP/HTTP ------------------------------------------------------


class Receiver:
    """An OTLP/HTTP collector on loopback: keeps each request's path and body, answers 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bytes]] = []
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._answer, listeners)

    async def _answer(self, stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some()
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])
                }
                length = int(headers.get("content-length", "0"))
                while len(buffer) < length:
                    buffer += await stream.receive_some()
                body, buffer = buffer[:length], buffer[length:]
                self.requests.append((lines[0].split()[1], body))
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
                )

    def spans(self) -> list[Any]:
        found = []
        for path, body in self.requests:
            if path == "/v1/traces":
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                found += [s for r in request.resource_spans for scope in r.scope_spans for s in scope.spans]
        return found


async def test_hive_run_refuses_an_exporter_it_cannot_use_before_it_spawns_the_agent(
    fake: FakeClaude,
) -> None:
    fake.script([{"default_turn": True}])
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", "hello"],
            env={
                **os.environ,
                **claude_env(fake),
                "OTEL_TRACES_EXPORTER": "zipkin",
            },
            cwd=fake.root,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2
    assert b"hive: OTEL_TRACES_EXPORTER='zipkin': hive exports traces with otlp or console" in done.stderr
    assert fake.starts() == []


async def test_hive_run_exports_its_turn_over_otlp_and_claude_runs_under_it(fake: FakeClaude) -> None:
    fake.script([{"replay": "02_tool_turn_with_partial_messages.jsonl"}])
    receiver = Receiver()
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(receiver.serve)
            done = await trio.run_process(
                [sys.executable, "-m", "hive.cli", "run", "--name", "e2e", "list the files"],
                env={
                    **os.environ,
                    **claude_env(fake),
                    "OTEL_TRACES_EXPORTER": "otlp",
                    "OTEL_METRICS_EXPORTER": "otlp",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
                    "OTEL_SERVICE_NAME": "hive-e2e",
                },
                cwd=fake.root,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    (turn,) = [s for s in spans if s.name == "invoke_agent e2e"]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert tools and all(t.parent_span_id == turn.span_id for t in tools)
    (start,) = fake.starts()
    given = start["env"]["TRACEPARENT"]
    assert given == f"00-{turn.trace_id.hex()}-{turn.span_id.hex()}-01"
    assert "/v1/metrics" in {path for path, _ in receiver.requests}


async def test_a_bash_task_started_in_a_turn_is_in_the_turns_trace_and_its_wake_still_links_the_next(
    daemon: DaemonHandle, agent: AgentListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's TRACEPARENT (in the environment of the agent, so of the relay the agent spawns)
    goes with the run call to the real daemon, whose task span is its child there."""
    turn_trace, turn_span = 0xFEED, 0xBEEF
    receiver = Receiver()
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery, agent.serving():
            await nursery.start(receiver.serve)
            monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.port}")
            async with daemon.running() as process:
                monkeypatch.setenv("TRACEPARENT", telemetry.traceparent(turn_trace, turn_span))
                async with daemon.session() as session:
                    done = await session.call_tool(
                        "run", {"cmd": "true", "name": "in-turn", "wait_seconds": 0}
                    )
                    assert not done.is_error, done.content
                    (wake,) = await agent.wait_for(1)
                process.send_signal(signal.SIGINT)
                await process.wait()
            nursery.cancel_scope.cancel()
    (task,) = [s for s in receiver.spans() if s.name == "execute_tool bash"]
    assert (int(task.trace_id.hex(), 16), int(task.parent_span_id.hex(), 16)) == (turn_trace, turn_span)
    assert wake.traceparent == f"00-{task.trace_id.hex()}-{task.span_id.hex()}-01"


async def test_hive_runs_console_exports_go_to_stderr_and_its_stdout_stays_stream_json(
    fake: FakeClaude,
) -> None:
    fake.script([{"replay": "02_tool_turn_with_partial_messages.jsonl"}])
    with trio.fail_after(GUARD):
        done = await trio.run_process(
            [sys.executable, "-m", "hive.cli", "run", "--name", "shown", "list the files"],
            env={
                **_without_otel(),
                **claude_env(fake),
                "OTEL_TRACES_EXPORTER": "console",
                "OTEL_METRICS_EXPORTER": "console",
            },
            cwd=fake.root,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1]["type"] == "result"
    assert b'"name": "invoke_agent shown"' in done.stderr
    assert b'"name": "gen_ai.client.operation.duration"' in done.stderr


# -- an unreachable collector: every exit within the documented bound --------------------------------

EXIT_MARGIN = 3.0
"""What a process may take beyond the flush's bound to exit (the guard of the bound; not a measure)."""


@contextmanager
def hanging_collector() -> Iterator[dict[str, str]]:
    """The environment of an OTLP exporter whose collector accepts connections and never
    answers (a listening socket nobody accepts on: the kernel completes each connection and
    takes the request, and no reply ever comes)."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(64)
        yield {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{listening.getsockname()[1]}",
        }


async def exited_within_the_bound(process: trio.Process | DaemonProcess) -> int:
    """``process``'s exit status, once it exits: within the flush's bound (and a margin)."""
    with trio.fail_after(FLUSH_MILLIS / 1000 + EXIT_MARGIN):
        return await process.wait()


def _without_otel() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACE"))}


async def test_hive_run_exits_within_the_bound_after_its_result_with_a_collector_that_never_answers(
    fake: FakeClaude,
) -> None:
    fake.script([{"replay": "02_tool_turn_with_partial_messages.jsonl"}])
    with hanging_collector() as otel, open(fake.root / "run.err", "wb") as err, trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "hive.cli", "run", "list the files"],
            env={**_without_otel(), **claude_env(fake), **otel},
            cwd=fake.root,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        assert process.stdout is not None
        async with process.stdout:
            output = b""
            while b'"type":"result"' not in output:
                data = await process.stdout.receive_some()
                assert data, (fake.root / "run.err").read_text()
                output += data
            assert await exited_within_the_bound(process) == 0


async def test_hive_agent_exits_within_the_bound_on_sigint_with_a_collector_that_never_answers(
    root: Path, fake: FakeClaude
) -> None:
    with hanging_collector() as otel:
        fake.script([{"default_turn": True}])
        with trio.fail_after(GUARD):
            async with running_agent(root, {**claude_env(fake), **otel}) as agent:
                await send_wake(agent.socket, Wake("bash-task-x", "x ended"))
                await agent.hive_line()
                agent.process.send_signal(signal.SIGINT)
                assert await exited_within_the_bound(agent.process) == 0, agent.stderr()


async def test_hive_bash_daemon_exits_within_the_bound_on_sigint_with_a_collector_that_never_answers(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = DaemonHandle.under(short_tmp)
    with hanging_collector() as otel, trio.fail_after(GUARD):
        for name, value in otel.items():
            monkeypatch.setenv(name, value)
        async with daemon.running(agent=False, stop=False) as process:
            async with daemon.session() as session:
                done = await session.call_tool("run", {"cmd": "true", "name": "t", "wait_seconds": 5})
                assert not done.is_error, done.content
            process.send_signal(signal.SIGINT)
            assert await exited_within_the_bound(process) == 0, daemon.stderr_text()


def test_where_nothing_is_exported_nothing_of_it_is_imported() -> None:
    """`hive run`'s and the harness's calls, with no OTEL_*_EXPORTER: neither OpenTelemetry nor
    hive's setup or span code is imported (they cost `hive run` 9 ms before its agent's spawn)."""
    script = (
        "import sys, hive.hive_run\n"
        "from hive import telemetry\n"
        "assert telemetry.turn_ids() is None\n"
        "with telemetry.exporting('x') as t, telemetry.traced_turn('a', provider='p') as trace:\n"
        "    assert t is None and trace is telemetry.NO_TRACE\n"
        "telemetry.task_ended(telemetry.task_started('t', 0.0), 'done', 0, ended_at=1.0, duration=1.0)\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry', 'hive.telemetry._setup', "
        "'hive.telemetry._turns', 'secrets'))]\n"
        "print(loaded)\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        timeout=GUARD,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
