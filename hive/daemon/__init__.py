"""The daemon kit: what a long-lived per-agent daemon and its per-turn stdio relay are built from.

The outbox (``OwedItems``) is what a daemon owes the agent, keyed by id, and the one rule of
when an item counts as told. ``serve_mcp`` serves a :class:`ToolServer` as MCP on a Unix socket (Trio, attrs and the standard
library: no MCP SDK, whose import costs seconds of CPU at every start), one session per
connection, with the uid check and the receipts that tell whether an answer reached the agent.
Names are exported lazily, so that the relay (standard library only) pays for none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hive._lazy import export_lazily

__all__ = [
    "HANDSHAKE_VERSIONS",
    "OBSERVER",
    "PlainAnswer",
    "REFUSED",
    "CallTool",
    "OwedItems",
    "Receipts",
    "SendWake",
    "Settled",
    "Telling",
    "ToolAnswer",
    "ToolServer",
    "negotiate",
    "read_message",
    "refusal",
    "refusal_line",
    "refusal_of",
    "refuse_connection",
    "serve_connection",
    "serve_mcp",
    "tool_result",
    "WithdrawWake",
]

if TYPE_CHECKING:
    from hive.daemon._messages import read_message
    from hive.daemon._owed import OwedItems, SendWake, Settled, Telling, WithdrawWake
    from hive.daemon._receipts import Receipts
    from hive.daemon._serve import refusal, refuse_connection, serve_connection, serve_mcp
    from hive.daemon._tools import CallTool, PlainAnswer, ToolAnswer, ToolServer, tool_result
    from hive.daemon.protocol import (
        HANDSHAKE_VERSIONS,
        OBSERVER,
        REFUSED,
        negotiate,
        refusal_line,
        refusal_of,
    )

export_lazily(__name__)
