"""What the daemon keeps of each subagent session on disk: its record (attrs types).

``<state>/subagents/<name>.json`` holds the session id (so ``continue`` resumes it after a
daemon restart), the turn in progress with the pids of its agent processes (so a restarted
daemon waits for a claude the last one left running), and the last turn's end, with whether
the caller has been told of it (so a restarted daemon still wakes it). No environment and no
prompt is written here: an environment may hold secrets.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.define
class AgentPid:
    """An agent process of a turn: its pid and start time (so a reused pid is never mistaken for it)."""

    pid: int
    start: int
    """Field 22 of ``/proc/<pid>/stat``: clock ticks from boot to the process's start."""
    signalled: bool = False


@attrs.define
class Current:
    """The turn in progress."""

    turn: str
    number: int
    started_at: float
    agents: list[AgentPid] = attrs.field(factory=list)


@attrs.define
class TurnEnd:
    """How a turn ended, as ``status`` tells it."""

    turn: str
    number: int
    stop_reason: str
    """completed, interrupted, exited, idle, failed, daemon_stopped or lost (see ``_turns``)."""
    is_error: bool
    started_at: float
    ended_at: float
    result: str | None = None
    """The tail of the result text (the agent's, or what went wrong)."""
    errors: list[str] = attrs.field(factory=list)
    tokens: dict[str, Any] = attrs.field(factory=dict)
    cost_usd: float = 0.0
    """What the turn cost, in USD: how much its session's cost grew (`hive.sink.SessionCost`)."""
    context_used: int | None = None
    context_size: int | None = None
    told: bool = False
    """Whether the caller has seen this end (an answer carried it, or its wake was taken)."""


@attrs.define
class SessionRecord:
    """What the daemon keeps of one session (``<state>/subagents/<name>.json``)."""

    name: str
    backend: str
    """``claude`` or ``acp``: the runtime every turn of this session runs on."""
    created_at: float
    session_id: str | None = None
    model: str | None = None
    effort: str | None = None
    turns: int = 0
    agent_socket: str | None = None
    """Where this session's ends are told (the caller's HIVE_AGENT_SOCKET), if anywhere."""
    current: Current | None = None
    agents: list[AgentPid] = attrs.field(factory=list)
    """Agent processes of an ended turn that may still be running (an interrupted claude
    exiting, one that ignored SIGINT); emptied once they have exited."""
    last: TurnEnd | None = None
    cost_usd: float = 0.0
    """What the session has cost so far, in USD, as its agent last said: the next turn's cost is
    measured from it."""
