"""The session to resume, ``<state>/session``: kept across restarts of the harness."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs

from hive._files import read_regular, write_atomic
from hive.agent._wire import RecordError, SessionFile, decode_session, encode

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SessionStore:
    """The session id of one runtime backend (a claude session id means nothing to an ACP agent)."""

    path: Path
    backend: str
    _saved: str | None = None

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
        return saved.session_id

    def save(self, session_id: str | None) -> None:
        """Keep ``session_id`` (None: forget it) if it changed; written by temp file + rename."""
        if session_id == self._saved:
            return
        if session_id is None:
            self.path.unlink(missing_ok=True)
        else:
            write_atomic(self.path, encode(SessionFile(self.backend, session_id)), durable=False)
        self._saved = session_id


def saved_session(path: Path) -> str | None:
    """The session id kept at ``path``, whatever its backend; None if there is none or it
    cannot be read (blocking)."""
    try:
        data = read_regular(path)
        return None if data is None else decode_session(data).session_id
    except (OSError, RecordError):
        return None
