"""The limits the bash relay, the ``hive`` CLI and the MCP tools share, written once.

Standard library only, and cheap to import: ``hive-bash-mcp`` and ``hive bash`` read these
without the daemon's modules (importing those would cost the MCP SDK's import on every start).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

MAX_WAIT = 30.0
"""The longest a tool call may wait (``wait_seconds``, ``hive bash --wait``); a longer wait
asked for is capped at this."""

MAX_NAME = 64
"""The longest name of a bash task or a subagent, in characters."""
NAME_PATTERN = rf"[A-Za-z0-9._-]{{1,{MAX_NAME}}}"
"""What a task's or a subagent's name is made of: its whole text must match (``fullmatch``)."""
NAME_SCHEMA_PATTERN = f"^{NAME_PATTERN}$"
"""The same, as a JSON Schema ``pattern`` (which matches anywhere unless anchored)."""
NAME_RULE = f"1 to {MAX_NAME} ASCII letters, digits, '.', '_' or '-'"
"""The name rule in words, for messages."""

MAX_CMD_BYTES = 1024 * 1024
"""The largest command the bash tools' `run` takes, in bytes of UTF-8. A command is passed to
bash through a file, not argv, so this is a choice, not Linux's 128 KiB limit on one argument:
a longer script belongs in a file of its own (`bash FILE`)."""


MAX_PROMPT_BYTES = 1024 * 1024
"""The largest prompt ``hive run`` takes, in bytes of UTF-8: what one turn of ``hive-agent``
carries at most. claude reads it on stdin and an ACP agent in a JSON-RPC message, so it is not
bound by Linux's 128 KiB limit on one argument."""


def state_dir_path(env: Mapping[str, str] = os.environ) -> str:
    """Where the state directory is when nobody says: ``HIVE_STATE_DIR``, else
    ``$XDG_STATE_HOME/hive``, else ``~/.local/state/hive`` (a string: the relay imports no
    pathlib; ``hive._state_dir.default_state_dir`` is the same as a Path)."""
    if env.get("HIVE_STATE_DIR"):
        return env["HIVE_STATE_DIR"]
    xdg = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(xdg, "hive")


def is_name(text: str) -> bool:
    """Whether ``text`` is a task's or a subagent's name (:data:`NAME_RULE`).

    The pattern is compiled on first use (and kept by ``re``): the relay, which imports this
    module for :data:`MAX_WAIT`, never pays for it."""
    return re.fullmatch(NAME_PATTERN, text) is not None
