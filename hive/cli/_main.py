"""``hive``: the whole command line, and its one entry point."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hive import __version__
from hive._main import run_main
from hive.cli._types import demo_within

FAMILIES = (
    ("bash", "run and inspect background bash tasks"),
    ("ls", "one line per agent: running or not, its turn, queue, context, tasks, last turn"),
    ("web", "the fleet's live page in a browser (a token guards it; loopback by default)"),
    ("agent", "talk to a running hive-agent, read its turn log"),
)
"""The commands whose parsers live in ``hive.cli._<name>``, with their help: that module's
``add_commands(commands, help)`` adds them, and is imported (with what it imports) only when
one of its commands may be the command parsed."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the ``command`` about to be parsed, only what it needs is imported."""
    parser = argparse.ArgumentParser(
        prog="hive", description="Operate hive: background bash tasks, agents, the demo."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run hive-agent with a scripted demo agent on a temporary state directory (no API key)",
        description="Run hive-agent (with its own hive-bash-daemon) on a temporary state directory, its agent "
        "a scripted ACP agent shipped with hive (no model, no API key). One operator message starts a turn in "
        "which the agent starts a background task through the bash relay and calls loose_ends through its relay; the "
        "task's end wakes the next turn. Then hive-agent is stopped with SIGINT, the turn log is printed as "
        "`hive agent log` shows it, and the directory is removed.",
    )
    demo.add_argument(
        "--within",
        type=demo_within,
        default=None,
        metavar="S",
        help="how long to wait for hive-agent to be ready and end its two turns, in all (default 120)",
    )
    demo.set_defaults(handler=_demo)

    # Its description and flags come with hive.hive_run (when it is the command parsed).
    run = commands.add_parser("run", help="run one agent turn, printing its stream-json")
    if command in (None, "run"):
        # hive.hive_run brings Trio and the runtimes with it: not for the other commands.
        from hive.hive_run import add_arguments

        add_arguments(run)
    run.set_defaults(handler=_run_turn)

    for name, help in FAMILIES:
        if command in (None, name):
            importlib.import_module(f"hive.cli._{name}").add_commands(commands, help)
        else:
            commands.add_parser(name, help=help)
    return parser


def _run_turn(args: argparse.Namespace) -> int:
    from hive.hive_run import run_turn

    return run_turn(args)


def _demo(args: argparse.Namespace) -> int:
    from hive.demo import run_demo

    return run_demo() if args.within is None else run_demo(within=args.within)


def main(argv: Sequence[str] | None = None) -> int:
    """``hive ARGV`` (default: the process's arguments): its exit status (README, "Exit status")."""
    return run_main("hive", lambda: _command(sys.argv[1:] if argv is None else list(argv)), interrupted=130)


def _command(argv: list[str]) -> int:
    parser = build_parser(_command_of(argv))
    _mark_commands(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Told by the command they were given to, with its usage (the top level's usage says
        # nothing of `hive agent status`'s flags).
        command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    code: int = args.handler(args)
    return code


def _mark_commands(parser: argparse.ArgumentParser) -> None:
    """Give every command's parser, down the tree, itself as the default ``command_parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(command_parser=command)
                _mark_commands(command)


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (the top level takes no option with a value), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)
