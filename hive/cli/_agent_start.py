"""Waiting for a hive-agent that is starting, before saying that none answers.

Its agent socket is served only once its start is done (2-3.5 s on a loaded machine), and
``hive-agent ... &`` followed at once by ``hive agent prompt`` (the README's quick start, pasted
as one block) asks before then. An agent is starting while a hive-agent holds its state
directory's lock (read from ``/proc/locks``: the lock is not taken) and its socket does not
answer yet: every ``hive agent`` command waits for it, up to `STARTING_WAIT`. A harness takes the
lock once its imports are done, so a message (``prompt``, ``compact``) also waits up to
`SPAWN_WAIT` for one to take it. The wait is woken by the socket's and the state directory's
changes (inotify), never by a timer. Trio is imported only when a wait begins: the CLI's help
names the bounds without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from hive._state_dir import lock_holder

if TYPE_CHECKING:
    from hive._inotify import Inotify

LOCK = "agent.lock"
"""``hive-agent``'s lock on its state dir (`hive.agent.harness.LOCK_FILE`)."""
STARTING_WAIT = 30
"""The most seconds ``hive agent`` waits for the socket of a hive-agent that holds the lock."""
SPAWN_WAIT = 5
"""The most seconds ``hive agent prompt`` and ``compact`` wait for a hive-agent to take the lock."""


@attrs.frozen
class StartWaits:
    """How long a ``hive agent`` command waits for a hive-agent that is starting (its parser's
    default ``waits``)."""

    spawn: float = 0
    """For one to take the state directory's lock (`SPAWN_WAIT` for a message)."""
    starting: float = STARTING_WAIT
    """For the socket of one that holds it."""


async def wait_started(socket: Path, state_dir: Path, waits: StartWaits) -> int | None:
    """Until something listens on ``socket``, while a hive-agent is starting on ``state_dir``
    (it holds the lock, or takes it within ``waits.spawn`` seconds). The pid of the hive-agent
    that held the lock when the wait ended (None: none did)."""
    import trio

    from hive._inotify import Inotify

    start = trio.current_time()
    holder = None
    with Inotify() as changes:
        while True:
            for directory in (socket.parent, state_dir):
                _watch_nearest(changes, directory)
            if await _listens(socket):
                return holder
            holder = lock_holder(state_dir / LOCK)
            left = start + (waits.spawn if holder is None else waits.starting) - trio.current_time()
            if left <= 0:
                return holder
            with trio.move_on_after(left):
                await changes.changed()


def _watch_nearest(changes: Inotify, directory: Path) -> None:
    """Watch ``directory``, or while it is missing its nearest ancestor that exists."""
    from hive._inotify import IN_CREATE, IN_DELETE, IN_MODIFY, IN_MOVED_TO

    for path in (directory, *directory.parents):
        try:
            changes.watch(path, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MODIFY)
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            return  # no socket can appear under a file: nothing to wait for there
        return


async def _listens(socket: Path) -> bool:
    import trio

    try:
        stream = await trio.open_unix_socket(str(socket))
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
        return False
    await stream.aclose()
    return True
