"""``hive run``: one turn from the command line, through the runtime the environment names."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from pathlib import Path

import trio

from hive.runtime import (
    Canceller,
    CompactionPolicy,
    Config,
    HiveRuntimeError,
    Permission,
    Progress,
    RuntimeSpec,
    TurnOutcome,
    open_runtime,
)
from hive.sink import JsonlSink

PERMISSION_HELP = (
    "what happens to a tool call the agent would ask about (nobody is there to ask): "
    "default (the agent's own settings decide; what it asks about is refused), "
    "accept_edits (file edits allowed, the rest refused), allow (everything allowed; "
    "claude refuses this as root unless IS_SANDBOX=1). Default: default"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")
    parser.add_argument(
        "--session", metavar="ID", help="continue this session (its id is printed after each turn)"
    )
    parser.add_argument(
        "--model", metavar="M", help="the model (claude: an alias such as sonnet, or a full id)"
    )
    parser.add_argument(
        "--effort", metavar="E", help="the effort level (claude: low, medium, high, xhigh or max)"
    )
    parser.add_argument("--system-prompt", metavar="TEXT", help="appended to the agent's system prompt")
    parser.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        help="stop the turn if the agent sends nothing for S seconds",
    )
    parser.add_argument(
        "--stop-grace",
        type=float,
        default=Config.__attrs_attrs__.stop_grace.default,
        metavar="S",
        help="after SIGINT, how long to wait for the agent's own end of the turn (default %(default)s)",
    )
    parser.add_argument(
        "--permission",
        choices=[p.value for p in Permission],
        default=Permission.DEFAULT.value,
        help=PERMISSION_HELP,
    )
    parser.add_argument(
        "--compact-at",
        type=float,
        metavar="F",
        help="after the turn, checkpoint and compact if the context is more than this fraction full",
    )


async def _run(args: argparse.Namespace) -> int:
    spec = RuntimeSpec.from_env()
    config = Config(
        cwd=Path.cwd(),
        model=args.model,
        effort=args.effort,
        system_prompt=args.system_prompt,
        idle_timeout=args.idle_timeout,
        stop_grace=args.stop_grace,
        compaction=CompactionPolicy(watermark=args.compact_at),
        permission=Permission(args.permission),
    )
    sink = JsonlSink(os.dup(sys.stdout.fileno()))
    progress = Progress()
    outcome: TurnOutcome | None = None
    stopped_by: list[signal.Signals] = []
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            startup = trio.CancelScope()
            turn: list[Canceller] = []

            async def stop_on_signals() -> None:
                async for signum in signals:
                    stopped_by.append(signal.Signals(signum))
                    if turn:
                        print(f"hive: {stopped_by[-1].name}: stopping the turn", file=sys.stderr)
                        turn[0].cancel()
                    else:
                        # The agent is starting: the runtime's stop path sends it SIGINT.
                        startup.cancel()

            nursery.start_soon(stop_on_signals)
            with startup:
                async with open_runtime(spec, config, session_id=args.session, progress=progress) as runtime:
                    turn.append(runtime.canceller())
                    outcome = await runtime.run(args.prompt, sink)
            nursery.cancel_scope.cancel()
    await sink.aclose()
    if outcome is None:
        what = progress.waiting_for or "the agent to start"
        print(f"hive: {stopped_by[0].name}: stopped while waiting for {what}", file=sys.stderr)
        return 128 + stopped_by[0]
    print(f"session: {outcome.session_id}", file=sys.stderr)
    if outcome.synthesized:
        why = f": {'; '.join(outcome.errors)}" if outcome.errors else ""
        print(
            f"hive: the turn ended without the agent's result ({outcome.stop_reason.value}){why}",
            file=sys.stderr,
        )
    return 1 if outcome.is_error else 0


def run_turn(args: argparse.Namespace) -> int:
    """The rest of the process's life: one turn, then the exit status."""
    # Everything the imports made lives until the process ends. Frozen, it is walked by none of
    # the collections during the turn, nor by the interpreter's last ones at exit (~20 ms).
    gc.freeze()
    try:
        return trio.run(_run, args)
    except HiveRuntimeError as exc:
        print(f"hive: {exc}", file=sys.stderr)
        return 2
    except ExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, HiveRuntimeError):
            print(f"hive: {leaf}", file=sys.stderr)
            return 2
        raise
