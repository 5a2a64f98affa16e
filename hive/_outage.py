"""The outage file: what ``hive-agent`` says, while a daemon it supervises is down, to the relays
in front of that daemon (``hive-bash-mcp``, ``hive-subagent-mcp``), which pass it on to the agent
as the error of a call the daemon cannot answer. Standard library only: the bash relay imports it.

hive-agent writes the file when the daemon ends (its whole text is the message) and removes it
once the daemon is back; a file left by a harness that died is removed by the next one.
"""

from __future__ import annotations

import os
import stat

MOST = 4096
"""The most of the file read: a message, not a document."""


def read_outage(path: str | os.PathLike[str] | None) -> str | None:
    """The message of the outage file at ``path`` (None: no outage said, or no file to look at)."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, MOST).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return text or None
