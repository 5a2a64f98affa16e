"""Who calls the subagent tools: where a subagent's agent runs and whom its ends are told to.

``hive-subagent-mcp`` (the kit's relay) says so once per connection, in the ``_meta`` of the
``initialize`` it relays (``hive.daemon.relay.CALLER_META``): its working directory, its
environment, its ``HIVE_AGENT_SOCKET`` and its flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from hive.daemon.relay import CALLER_META
from hive.subagent._convert import DecodeError, structure, unstructure
from hive.subagent._errors import BadArgument


@attrs.frozen
class Caller:
    """Who calls a tool: the subagent's agent runs in ``cwd`` with ``env`` (over the daemon's)."""

    cwd: str
    env: dict[str, str] = attrs.field(factory=dict)
    agent_socket: str | None = None
    """Where the ends of the turns it starts are told (its HIVE_AGENT_SOCKET); None: nowhere."""
    permission: str = "default"
    idle_timeout: float | None = None

    def meta(self) -> dict[str, Any]:
        """What the relay puts under :data:`CALLER_META`."""
        data: dict[str, Any] = unstructure(self)
        return data


def caller_of(client: Mapping[str, Any]) -> Caller:
    """The caller a client's ``initialize`` params name; ``BadArgument`` saying what to do if none."""
    meta = client.get("_meta")
    raw = meta.get(CALLER_META) if isinstance(meta, dict) else None
    if raw is None:
        raise BadArgument(
            f"this connection did not say who calls (its initialize has no _meta.{CALLER_META}); reach the "
            "subagent daemon through hive-subagent-mcp, which says so"
        )
    try:
        return structure(raw, Caller)
    except DecodeError as exc:
        raise BadArgument(f"this connection's _meta.{CALLER_META} cannot be read: {exc}") from None
