"""The turn ``hive run`` drives, in Trio, on an agent it may already have spawned."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from functools import partial

import trio

from hive import telemetry
from hive.runtime import (
    Backend,
    Canceller,
    Config,
    Progress,
    RuntimeSpec,
    TurnOutcome,
    open_runtime,
    release_prestarted,
)
from hive.sink import JsonlSink


async def _run(
    args: argparse.Namespace,
    spec: RuntimeSpec,
    config: Config,
    prompt: str,
    early: list[signal.Signals],
    *,
    ids: telemetry.TurnIds | None,
) -> int:
    sink = JsonlSink(os.dup(sys.stdout.fileno()))
    progress = Progress()
    outcome: TurnOutcome | None = None
    stopped_by: list[signal.Signals] = []
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            startup = trio.CancelScope()
            turn: list[Canceller] = []

            def stop(signum: signal.Signals) -> None:
                stopped_by.append(signum)
                if turn:
                    print(f"hive: {signum.name}: stopping the turn", file=sys.stderr)
                    turn[0].cancel()
                else:
                    # The agent is starting: the runtime's stop path sends it SIGINT.
                    startup.cancel()

            async def stop_on_signals() -> None:
                for received in early:
                    stop(received)
                async for signum in signals:
                    stop(signal.Signals(signum))

            nursery.start_soon(stop_on_signals)
            try:
                with startup:
                    async with open_runtime(
                        spec, config, session_id=args.session, progress=progress
                    ) as runtime:
                        turn.append(runtime.canceller())
                        with telemetry.traced_turn(
                            telemetry.agent_name(args.name),
                            provider="anthropic" if spec.backend is Backend.CLAUDE else "acp",
                            number=1,
                            trigger="operator",
                            parent=ids.parent if ids else None,
                        ) as trace:
                            outcome = await runtime.run(prompt, trace.sink(sink))
                            trace.ended(outcome)
            finally:
                # The agent spawned before Trio, if the runtime never got to adopt it.
                with trio.move_on_after(config.close_grace, shield=True):
                    await release_prestarted(config.close_grace)
            nursery.cancel_scope.cancel()
    await sink.aclose()
    if outcome is None:
        what = progress.waiting_for or "the agent to start"
        print(f"hive: {stopped_by[0].name}: stopped while waiting for {what}", file=sys.stderr)
        return 128 + stopped_by[0]
    print(session_line(outcome.session_id), file=sys.stderr)
    if outcome.synthesized:
        why = f": {'; '.join(outcome.errors)}" if outcome.errors else ""
        print(
            f"hive: the turn ended without the agent's result ({outcome.stop_reason.value}){why}",
            file=sys.stderr,
        )
    return 1 if outcome.is_error else 0


def session_line(session_id: str | None) -> str:
    """What stderr is told of the turn's session: its id, for ``--session`` next time, or that
    there is none to continue."""
    if session_id is None:
        return "hive: no session to continue: the agent ended the turn before it named one"
    return f"session: {session_id}"


def drive(
    args: argparse.Namespace,
    spec: RuntimeSpec,
    config: Config,
    prompt: str,
    early: list[signal.Signals],
    *,
    ids: telemetry.TurnIds | None = None,
) -> int:
    """Run the turn on ``prompt``; its exit status. ``early``: the signals received before Trio's
    receiver was open (acted on first); ``ids``: those of the turn's span, named in the agent's
    ``TRACEPARENT`` already, where telemetry is exported. What stops the turn from running is
    raised, grouped as Trio groups it, for ``hive``'s boundary (``hive._main.run_main``) to report."""
    with telemetry.exporting("hive-run") as exporting:
        if exporting is not None and ids is not None:
            exporting.ids.preset(ids.trace_id, ids.span_id)
        result: int = trio.run(partial(_run, args, spec, config, prompt, early, ids=ids))
    return result
