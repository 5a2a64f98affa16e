"""What the subagent manager answers its tools with: sessions as ``status`` shows them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from hive.subagent._live import Live
from hive.subagent._session_records import SessionRecord
from hive.subagent._slots import Phase


@attrs.frozen
class View:
    """A session as ``status`` shows it."""

    record: SessionRecord
    slot: Phase | None
    live: Live | None
    log: Path

    @property
    def name(self) -> str:
        """The session's name."""
        return self.record.name


@attrs.frozen
class Status:
    """What ``status`` found: the sessions, and what to call once its answer is written."""

    views: list[View]
    delivered: Callable[[bool], None] | None
    """Call once the answer has been written (True) or could not be (False); None when the
    answer shows no end not yet told (nothing hangs on it)."""


@attrs.frozen
class Interrupted:
    """What ``interrupt`` did: ``sent`` is what the turn's stop path sends (``SIGINT``, or
    ``session/cancel`` on ACP; ``nothing`` for a turn stopped before its agent started), None
    when the turn was already stopping or none was live."""

    view: View
    sent: str | None
    idle: bool = False
    """No turn of the name was live: nothing was done."""
