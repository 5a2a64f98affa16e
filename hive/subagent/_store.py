"""The state directory of the subagent daemon.

    <state>/subagent.sock              the daemon's socket (0600)
    <state>/subagent-daemon.lock       held by the daemon that serves this state directory (its pid)
    <state>/subagent-daemon.log        the log of a daemon started on first use
    <state>/subagent-daemon.starting   held by the relay starting the daemon until it serves
    <state>/subagents/<name>.json      the session's record (see ``_records``)
    <state>/subagents/<name>.jsonl     every turn's stream, in claude's stream-json shape

Records are small and written whole (temporary file, then rename: a crash leaves the old or
the new one), synchronously: a write to the page cache outlives a daemon SIGKILL, which is
the crash that matters; nothing is fsynced. Every file here is opened as ``hive._files`` opens
state files: never through a symlink, created 0600 in 0700 directories; a write that fails
(ENOSPC, EIO) leaves no temporary file behind.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import attrs

from hive._files import ensure_private_dir, path_field, read_regular, write_atomic
from hive._limits import is_name
from hive.subagent._convert import DecodeError, structure, unstructure
from hive.subagent._session_records import SessionRecord

log = logging.getLogger(__name__)


@attrs.frozen
class Store:
    """The subagent daemon's state directory (the paths in it are listed above)."""

    state_dir: Path
    sessions: Path = path_field("state_dir", "subagents")
    """Where the sessions' records and turn logs are."""
    socket: Path = path_field("state_dir", "subagent.sock")
    """The daemon's socket."""
    lock: Path = path_field("state_dir", "subagent-daemon.lock")
    """The lock the daemon serving this directory holds (with its pid in it)."""
    daemon_log: Path = path_field("state_dir", "subagent-daemon.log")
    """The log of a daemon started on first use."""

    def create_dirs(self) -> None:
        """Create the state directory and ``sessions`` (0700), if they are not there."""
        ensure_private_dir(self.state_dir)
        ensure_private_dir(self.sessions)

    def record_path(self, name: str) -> Path:
        """Where the record of the session ``name`` is."""
        return self.sessions / f"{name}.json"

    def log_path(self, name: str) -> Path:
        """Where the turn log of the session ``name`` is."""
        return self.sessions / f"{name}.jsonl"

    def save(self, record: SessionRecord) -> None:
        """Replace the record on disk; raises OSError (ENOSPC, EIO) with the old one left as it was."""
        data = json.dumps(unstructure(record), separators=(",", ":")).encode()
        write_atomic(self.record_path(record.name), data, durable=False)

    def load(self, name: str) -> SessionRecord | None:
        """The record of the session ``name`` (None if there is none); DecodeError if it cannot be read."""
        try:
            data = read_regular(self.record_path(name))
            if data is None:
                return None
            raw = json.loads(data)
        except (OSError, ValueError) as exc:
            raise DecodeError(f"cannot read the record of {name!r}: {exc}") from None
        return structure(raw, SessionRecord)

    def load_all(self) -> Iterator[SessionRecord]:
        """Every readable record; one that cannot be read is logged and left as it is."""
        try:
            entries = sorted(self.sessions.iterdir())
        except FileNotFoundError:
            return
        for path in entries:
            name = path.name.removesuffix(".json")
            if path.suffix != ".json" or not is_name(name):
                continue
            try:
                record = self.load(name)
            except DecodeError as exc:
                log.warning("%s; it is ignored", exc)
                continue
            if record is not None:
                yield record
