"""``hive run``: one turn from the command line, through the runtime the environment names.

The agent is spawned first, before Trio, the runtime and the backend are imported (see
``hive.runtime._prestart``): those imports then overlap the agent's own start. Until Trio
takes them over, SIGINT and SIGTERM are recorded rather than acted on, so that neither can end
hive with its agent left behind; the turn (``hive._turn``) then acts on them first.
"""

from __future__ import annotations

import argparse
import gc
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from hive.runtime import (
    CompactionPolicy,
    Config,
    Permission,
    RuntimeSpec,
    first_command,
    interrupt_unclaimed,
    prestart,
)

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


def config_from(args: argparse.Namespace) -> Config:
    return Config(
        cwd=Path.cwd(),
        model=args.model,
        effort=args.effort,
        system_prompt=args.system_prompt,
        idle_timeout=args.idle_timeout,
        stop_grace=args.stop_grace,
        compaction=CompactionPolicy(watermark=args.compact_at),
        permission=Permission(args.permission),
    )


@contextmanager
def recording_signals() -> Iterator[list[signal.Signals]]:
    """SIGINT and SIGTERM recorded, not acted on, inside the block (Trio's receiver, once
    open, takes them over; it hands the handlers back when it closes)."""
    received: list[signal.Signals] = []

    def record(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum))

    previous = {signum: signal.signal(signum, record) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def run_turn(args: argparse.Namespace) -> int:
    """The rest of the process's life: one turn, then the exit status. A turn that could not
    run raises (a ``HiveRuntimeError``, exit 2 at ``hive``'s boundary, ``hive._main``)."""
    with recording_signals() as early:
        try:
            spec = RuntimeSpec.from_env()
            config = config_from(args)
            prestart(first_command(spec, config, args.prompt, args.session), cwd=config.cwd)
            from hive._turn import drive

            # Everything the imports made lives until the process ends. Frozen, it is walked by
            # none of the collections during the turn, nor by the interpreter's last ones at
            # exit (~20 ms).
            gc.freeze()
            return drive(args, spec, config, early)
        finally:
            # Only when the turn never got to adopt it (a failed import, say): SIGINT, as ever.
            interrupt_unclaimed()
