"""The session to resume, ``<state>/session``, and what it has cost so far: kept across restarts
of the harness (a resumed session's next turn is measured from that cost, not counted whole)."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs

from hive._files import fsync_dir, read_regular, write_atomic
from hive.agent._harness_files import RecordError, SessionFile, TurnRecord, decode_session, encode
from hive.sink import SessionCost

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SessionStore:
    """The session id of one runtime backend (a claude session id means nothing to an ACP agent)."""

    path: Path
    backend: str
    _saved: str | None = None
    cost: SessionCost = attrs.field(factory=SessionCost)
    """The saved session's cost so far (that of no session until one is loaded or saved)."""

    def load(self) -> str | None:
        """The session to resume, if one was saved for this backend."""
        try:
            data = read_regular(self.path)
        except OSError as exc:
            log.warning("%s cannot be read (%s): a new session starts", self.path, exc)
            return None
        if data is None:
            return None
        try:
            saved = decode_session(data)
        except (OSError, RecordError) as exc:
            log.warning("%s cannot be read (%s): a new session starts", self.path, exc)
            return None
        if saved.backend != self.backend:
            log.info(
                "%s is a %s session; the %s runtime starts a new one", self.path, saved.backend, self.backend
            )
            return None
        self._saved = saved.session_id
        self.cost = SessionCost(saved.session_id, saved.cost_usd)
        return saved.session_id

    def save(self, session_id: str | None, cost: SessionCost) -> None:
        """Keep ``session_id`` (None: forget it) and its ``cost`` so far (a cost of another
        session: nothing yet) if either changed; written by temp file + rename, made durable
        (the file and its directory: a power cut keeps the agent's context). Blocking."""
        kept = cost if cost.session_id == session_id else SessionCost(session_id)
        if session_id == self._saved and kept == self.cost:
            return
        if session_id is None:
            self.path.unlink(missing_ok=True)
        else:
            write_atomic(self.path, encode(SessionFile(self.backend, session_id, kept.usd)))
        fsync_dir(self.path.parent)
        self._saved, self.cost = session_id, kept


def saved_session(path: Path) -> SessionCost | None:
    """The session kept at ``path``, whatever its backend, and its cost so far; None if there is
    none or it cannot be read (blocking)."""
    try:
        data = read_regular(path)
        if data is None:
            return None
        saved = decode_session(data)
    except (OSError, RecordError):
        return None
    return SessionCost(saved.session_id, saved.cost_usd)


def resumed_cost(saved: SessionCost, last: TurnRecord | None) -> SessionCost:
    """The session's cost a restarted harness measures its next turn from.

    The last ended turn's record says it, where that turn was of the saved session: the session
    file is saved before the turn's record is written, so a harness that died between the two
    left the file ahead of the log, and measuring from the file would lose the cost of the turn
    that was never recorded (from the log, the next turn's cost includes it). Else the file's."""
    if (
        last is not None
        and saved.session_id is not None
        and last.session_id == saved.session_id
        and last.session_cost_usd > 0
    ):
        return SessionCost(saved.session_id, last.session_cost_usd)
    return saved
