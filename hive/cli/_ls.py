"""``hive ls``: one line per agent of the fleet, from its state directory."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from hive._when import clock, span

if TYPE_CHECKING:
    from hive.fleet import AgentView

DESCRIPTION = """\
One line per agent, read from its state directory: whether its harness runs (its socket answers
`status` within 1 s; else `not answering`, also when a harness holds the state dir's lock but its
socket is elsewhere; `not its own socket` when its socket is a symlink, another user's, or
answered by another agent's harness; else `stopped`) and which daemon it supervises is down
(`running (bash daemon down)`: the harness is starting it again), idle or in a turn and for how long, the messages queued, the context used, its session, its bash daemon's running
tasks and loose ends, its subagents running, and how its last turn ended. An agent that is not
running is listed from its files. Nothing is locked or written, and no agent holds up the others.

Each DIR is an agent's state directory, or a directory holding them (one level down). Without
DIR: HIVE_STATE_ROOT (directories separated by `:`), else /var/lib/hyperhive (the NixOS module's)
where it exists, else the default state directory."""

COLUMNS = (
    "agent",
    "harness",
    "doing",
    "queue",
    "context",
    "session",
    "tasks",
    "loose",
    "subagents",
    "last turn",
)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], help: str) -> None:
    ls = commands.add_parser(
        "ls", help=help, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ls.add_argument(
        "dirs", nargs="*", metavar="DIR", type=Path, help="state directories, or directories of them"
    )
    ls.add_argument("--json", action="store_true", help="one JSON object per agent, a line each")
    ls.set_defaults(handler=_ls)


def _ls(args: argparse.Namespace) -> int:
    import trio

    from hive.fleet import default_roots, given_roots, state_dirs, survey_all

    roots = given_roots(args.dirs) or default_roots()
    views = trio.run(survey_all, state_dirs(roots))
    if args.json:
        for view in views:
            print(json.dumps(attrs.asdict(view), separators=(",", ":")))
        return 0
    if not views:
        where = ", ".join(str(r) for r in roots)
        print(f"no agent state directories in {where} (give one with `hive ls DIR`, or set HIVE_STATE_ROOT)")
        return 0
    now = time.time()
    rows = [COLUMNS, *(row(v, now) for v in views)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    for r in rows:
        print("  ".join([*(cell.ljust(w) for cell, w in zip(r, widths, strict=False)), r[-1]]).rstrip())
    return 0


def row(view: AgentView, now: float) -> tuple[str, ...]:
    """The cells of one agent's line, at ``now`` (Unix time)."""
    doing = "-"
    if view.state is not None:
        doing = view.state
        if view.state in ("turn", "compacting") and view.since is not None:
            doing += f" {view.turn} for {span(now - view.since)}"
    fraction = view.context_fraction
    context = "-" if fraction is None else f"{fraction:.0%}"
    last = "-"
    if view.last_outcome is not None:
        last = view.last_outcome
        if view.last_ended is not None:
            last += f" at {clock(view.last_ended, now)}"
        if view.last_error:
            last += f": {view.last_error[:80]}"
    return (
        view.name,
        view.harness_says,
        doing,
        str(view.queued),
        context,
        view.session_start,
        str(view.tasks_running),
        str(view.loose_ends),
        str(view.subagents_running),
        last,
    )
