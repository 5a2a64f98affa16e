"""``hive agent status`` for a person: what the agent does now, and the last turn that ended.

A pure function of the harness's answer and the time now (the harness runs on this machine: its
clock is this one), so a test needs no harness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hive._when import clock, counted, span

if TYPE_CHECKING:
    from hive.agent_socket import AgentStatus, DaemonHealth


def describe_status(status: AgentStatus, now: float) -> list[str]:
    """The lines ``hive agent status`` prints for ``status``, read at ``now`` (Unix time)."""
    lines = [
        f"agent: {_doing(status, now)}",
        f"session: {status.session_id or '(none yet)'}",
        f"queue: {counted(status.queue, 'message')} waiting for a turn",
    ]
    if status.compact_pending:
        lines.append("compaction: asked for; it runs when the running turn ends")
    if status.context_used is not None:
        size = status.context_size
        of = f" of {size:,} ({status.context_used / size:.0%})" if size else ""
        lines.append(f"context: {status.context_used:,} tokens{of}")
    lines.append(f"last ended: {_last(status, now)}")
    spent = _spent(status)
    if spent:
        lines.append(f"cost: {spent}")
    if status.last_error:
        lines.append(f"last error: {status.last_error}")
    for what, health in (("bash daemon", status.bash_daemon), ("subagent daemon", status.subagent_daemon)):
        if health is not None:
            lines.append(f"{what}: {describe_daemon(health, now)}")
    return lines


def describe_daemon(health: DaemonHealth, now: float) -> str:
    """A daemon the harness supervises, as ``hive agent status`` says it."""
    if health.state == "running":
        again = f", started again {counted(health.restarts, 'time')}, last {health.last_exit}"
        return f"running (pid {health.pid}){again if health.restarts else ''}"
    text = f"DOWN since {clock(health.since, now)} ({health.last_exit})"
    if health.restart_at is not None:
        when = "now" if health.restart_at <= now else f"in {span(health.restart_at - now)}"
        text += f"; hive-agent starts it again {when}"
    return text


def _doing(status: AgentStatus, now: float) -> str:
    number, since = status.running_turn, status.running_since
    running = ""
    if number is not None and since is not None:
        running = f" {number} for {span(now - since)} (since {clock(since, now)})"
    match status.state:
        case "idle":
            return "idle"
        case "turn":
            head = f"in turn{running}" if running else "in a turn"
            return f"{head}, carrying {counted(status.carrying, 'message')}"
        case "compacting":
            return f"compacting its session: compaction{running}" if running else "compacting its session"
        case "retrying":
            return "waiting to retry a turn that could not start"
    return str(status.state)


def _last(status: AgentStatus, now: float) -> str:
    if status.last_turn is None:
        return "none yet"
    text = f"{_kind(status)} {status.last_turn}, {status.last_stop_reason or '?'}"
    started, ended = status.last_started, status.last_ended
    if ended is not None:
        text += f", at {clock(ended, now)} ({span(now - ended)} ago)"
        if started is not None:
            text += f", after {span(ended - started)}"
    return text


def _spent(status: AgentStatus) -> str:
    """What the last turn cost (and its tokens) and what its session has, where they are known."""
    parts = []
    if status.last_cost_usd is not None:
        tokens = status.last_tokens
        into = sum(v for k, v in tokens.items() if k.endswith("input_tokens") and isinstance(v, int))
        out = tokens.get("output_tokens")
        counts = f" ({into:,} tokens in, {out:,} out)" if tokens and isinstance(out, int) else ""
        parts.append(f"{usd(status.last_cost_usd)} the last {_kind(status)}{counts}")
    if status.session_cost_usd is not None:
        parts.append(f"{usd(status.session_cost_usd)} the session so far")
    return "; ".join(parts)


def _kind(status: AgentStatus) -> str:
    return "compaction" if status.last_kind == "compact" else "turn"


def usd(amount: float) -> str:
    """An amount of USD as a person reads it: cents, down to the hundredth of a cent."""
    return f"${amount:,.4f}"
