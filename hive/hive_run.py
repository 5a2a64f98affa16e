"""``hive run``: one turn from the command line, through the runtime the environment names.

The agent is spawned first, before Trio, the runtime and the backend are imported (see
``hive.runtime._prestart``): those imports then overlap the agent's own start. Until Trio
takes them over, SIGINT and SIGTERM are recorded rather than acted on, so that neither can end
hive with its agent left behind; the turn (``hive._hive_run_turn``) then acts on them first. What the
command line gives (the settings, the prompt) is read and checked before any of that: a bad one
ends ``hive run`` with exit status 2 and no agent spawned.
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import BinaryIO

from hive import telemetry
from hive._flags import compact_at, idle_timeout, setting, stop_grace
from hive._limits import MAX_PROMPT_BYTES
from hive._signals import recording_signals
from hive._text_input import in_words, process_stdin, read_text
from hive.runtime import (
    STOP_GRACE,
    CompactionPolicy,
    Config,
    Permission,
    RuntimeSpec,
    agent_environment,
    first_command,
    interrupt_unclaimed,
    prestart,
)

DESCRIPTION = """\
Run one turn through the runtime HIVE_RUNTIME names (claude, the default, runs HIVE_CLAUDE_COMMAND
or `claude`; acp runs HIVE_ACP_COMMAND with HIVE_ACP_ARGS and HIVE_ACP_ENV). The turn's stream-json
goes to stdout, one message a line; the session id goes to stderr (`session: ID`), for --session
next time. SIGINT or SIGTERM stops the turn (SIGINT to the agent) and prints its result; a second
one stops waiting for it.

The prompt is PROMPT's words joined with one space (quote it to keep its spacing), or stdin with
`-`, or the file --file F. A prompt over 128 KiB cannot be an argument (Linux's limit on one):
give it with `-` or --file, up to 1 MiB.

exit status:
  0        the turn's result is not an error
  1        it is an error (a stopped turn included), or hive failed (told in one line on stderr)
  2        the turn could not run: a bad flag or setting, no prompt, an agent that cannot be
           started or is refused, or a --session the agent does not know
  128+N    stopped by signal N while the agent was still starting (130: SIGINT, 143: SIGTERM)"""

PERMISSION_HELP = (
    "what happens to a tool call the agent would ask about (nobody is there to ask): "
    "default (the agent's own settings decide; what it asks about is refused), "
    "accept_edits (file edits allowed, the rest refused), allow (everything allowed; "
    "claude refuses this as root unless IS_SANDBOX=1). Default: default"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "prompt",
        nargs="*",
        metavar="PROMPT",
        help="what to ask the agent: its words, joined with one space; `-` alone reads it from stdin",
    )
    parser.add_argument(
        "--file",
        metavar="F",
        type=Path,
        help=f"read the prompt from the file F (UTF-8; up to {in_words(MAX_PROMPT_BYTES)}), not from PROMPT",
    )
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
        metavar="S",
        help="stop the turn if the agent sends nothing for S seconds (more than 0; default: never)",
    )
    parser.add_argument(
        "--stop-grace",
        metavar="S",
        help="after SIGINT, how long to wait for the agent's own end of the turn, in seconds (0 or "
        f"more; default {STOP_GRACE:g})",
    )
    parser.add_argument(
        "--permission",
        choices=[p.value for p in Permission],
        default=Permission.DEFAULT.value,
        help=PERMISSION_HELP,
    )
    parser.add_argument(
        "--name",
        metavar="NAME",
        help="the agent's name in OpenTelemetry spans and metrics (`invoke_agent NAME`) [HIVE_AGENT_NAME; "
        "default: the state directory's base name]",
    )
    parser.add_argument(
        "--compact-at",
        metavar="F",
        help="after the turn, run the checkpoint turn and compact if the context is more than this "
        "fraction full (in (0, 1]); 'off' for never (the default)",
    )


def config_from(args: argparse.Namespace) -> Config:
    """The runtime's config from ``hive run``'s flags, each checked as ``hive-agent`` checks it
    (``hive._flags``): a bad one is a ``BadInput`` naming the flag (exit 2)."""
    grace = STOP_GRACE if args.stop_grace is None else setting("--stop-grace", args.stop_grace, stop_grace)
    idle = None if args.idle_timeout is None else setting("--idle-timeout", args.idle_timeout, idle_timeout)
    watermark = None if args.compact_at is None else setting("--compact-at", args.compact_at, compact_at)
    return Config(
        cwd=Path.cwd(),
        model=args.model,
        effort=args.effort,
        system_prompt=args.system_prompt,
        idle_timeout=idle,
        stop_grace=grace,
        compaction=CompactionPolicy(watermark=watermark),
        permission=Permission(args.permission),
    )


def prompt_from(args: argparse.Namespace, stdin: BinaryIO | None = None) -> str:
    """The turn's prompt: PROMPT's words joined with one space, stdin (``-``) or the file
    ``--file`` (`hive._text_input.read_text`: a `TextRefused`, exit 2, says why not)."""
    return read_text(
        args.prompt,
        args.file,
        noun="prompt",
        cap=MAX_PROMPT_BYTES,
        longer="put the rest in a file the agent can read and name the file in the prompt",
        blank="give the agent something to do",
        stdin=stdin if stdin is not None else process_stdin(),
    )


def run_turn(args: argparse.Namespace) -> int:
    """The rest of the process's life: one turn, then the exit status. A turn that could not
    run raises (a ``BadInput`` or ``HiveRuntimeError``, exit 2 at ``hive``'s boundary,
    ``hive._main``)."""
    config = config_from(args)
    prompt = prompt_from(args)
    # Where telemetry is exported, the turn's span is named now: the agent spawned next gets
    # its TRACEPARENT (its own spans nest under the turn's).
    ids = telemetry.turn_ids()
    added = {"TRACEPARENT": ids.traceparent} if ids else {}
    with recording_signals() as early, agent_environment(added):
        try:
            spec = RuntimeSpec.from_env()
            prestart(first_command(spec, config, prompt, args.session), cwd=config.cwd)
            from hive._hive_run_turn import drive

            # Everything the imports made lives until the process ends. Frozen, it is walked by
            # none of the collections during the turn, nor by the interpreter's last ones at
            # exit (~20 ms).
            gc.freeze()
            return drive(args, spec, config, prompt, early, ids=ids)
        finally:
            # Only when the turn never got to adopt it (a failed import, say): SIGINT, as ever.
            interrupt_unclaimed()
