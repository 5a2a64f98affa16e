"""The subagent tools' behaviour in the daemon: arguments checked, the manager called, answers written.

Every answer has a text for the agent and structured content carrying the same guidance in
``message`` (Claude Code shows the model the structured content when both are there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from hive._arguments import ArgumentError, check_arguments
from hive._limits import MAX_WAIT
from hive._when import counted, in_seconds
from hive.subagent._caller import Caller
from hive.subagent._errors import BadArgument, SubagentError
from hive.subagent._manager import SubagentManager
from hive.subagent._session_records import TurnEnd
from hive.subagent._specs import TOOL_NAMES, TOOLS
from hive.subagent._views import Status, View


@attrs.frozen
class Answer:
    """A tool's answer, as the kit's MCP server writes it (``hive.daemon.ToolAnswer``)."""

    text: str
    structured: dict[str, Any]
    is_error: bool = False
    delivered: Callable[[bool], None] | None = attrs.field(default=None, eq=False, repr=False)
    """For an answer that shows turn ends: called once written, with whether it reached the agent."""


@attrs.define(eq=False)
class SubagentTools:
    manager: SubagentManager

    async def call(self, tool: str, arguments: dict[str, Any], caller: Caller) -> Answer:
        try:
            if tool not in TOOL_NAMES:
                raise BadArgument(f"unknown tool {tool!r:.60}; the tools are {', '.join(TOOL_NAMES)}")
            return await self._call(tool, arguments, caller)
        except SubagentError as exc:
            return error_answer(exc)

    async def _call(self, tool: str, arguments: dict[str, Any], caller: Caller) -> Answer:
        manager = self.manager
        try:
            # `force` is gone from interrupt's schema: a caller that still sends it gets SIGINT, like everyone.
            args = check_arguments(
                _SCHEMAS[tool], arguments, capped=_CAPPED, ignored=("force",) if tool == "interrupt" else ()
            )
        except ArgumentError as exc:
            raise BadArgument(str(exc)) from None
        if tool == "start":
            view = manager.start(
                args["name"],
                _prompt(args),
                caller,
                backend=args.get("runtime") or None,
                model=args.get("model") or None,
                effort=args.get("effort") or None,
            )
            return _started(view, caller, "started")
        if tool == "continue":
            view = manager.continue_(args["name"], _prompt(args), caller)
            return _started(view, caller, "continued")
        if tool == "interrupt":
            done = manager.interrupt(args["name"])
            return _interrupted(done.view, done.sent, "force" in arguments, idle=done.idle)
        status = await manager.status(args.get("name"), args.get("wait_seconds", 0.0))
        return attrs.evolve(_status(status), delivered=status.delivered)


_SCHEMAS = {tool["name"]: tool["inputSchema"] for tool in TOOLS}
_CAPPED = {"wait_seconds": MAX_WAIT}


def _prompt(args: dict[str, Any]) -> str:
    prompt: str = args["prompt"]
    if not prompt.strip():
        raise BadArgument("prompt must not be empty: say what the subagent is to do in this turn")
    return prompt


# -- answers --------------------------------------------------------------------------------------


def error_answer(exc: SubagentError) -> Answer:
    return Answer(text=str(exc), structured={"message": str(exc), "error": exc.kind}, is_error=True)


def session_json(view: View, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    record, live = view.record, view.live
    turn = None
    if live is not None and not live.ended.is_set():
        turn = {
            "number": live.number,
            "running_secs": round(now - live.started_at, 3),
            "pids": [agent.pid for agent in live.agents if agent.returncode is None],
            "interrupted_secs_ago": round(now - live.interrupted_at, 3) if live.interrupted_at else None,
        }
    return {
        "name": record.name,
        "runtime": record.backend,
        "slot": view.slot.value if view.slot else None,
        "session_id": record.session_id,
        "model": record.model,
        "effort": record.effort,
        "turns": record.turns,
        "log": str(view.log),
        "turn": turn,
        "last_turn": _end_json(record.last) if record.last else None,
    }


def _end_json(end: TurnEnd) -> dict[str, Any]:
    context = None
    if end.context_used is not None:
        context = {"used": end.context_used, "size": end.context_size}
    return {
        "number": end.number,
        "stop_reason": end.stop_reason,
        "is_error": end.is_error,
        "result": end.result,
        "errors": list(end.errors),
        "tokens": dict(end.tokens),
        "context": context,
        "duration_secs": round(end.ended_at - end.started_at, 3),
        "ended_at": end.ended_at,
    }


def _wake_of(view: View, caller: Caller) -> str | None:
    socket = caller.agent_socket or view.record.agent_socket
    return f"subagent-{view.name}" if socket else None


def _started(view: View, caller: Caller, how: str) -> Answer:
    wake = _wake_of(view, caller)
    when = (
        f"When it ends you are woken by a message from {wake}"
        if wake
        else "No wake will come (HIVE_AGENT_SOCKET is not set): check on it with status"
    )
    message = (
        f"subagent {view.name} {how}: its turn runs in the background ({view.record.backend}). {when}; "
        f"status(name={view.name!r}, wait_seconds=...) waits for it, interrupt(name={view.name!r}) stops it."
    )
    return Answer(message, {"message": message, "subagent": session_json(view), "wake": wake})


def _interrupted(view: View, sent: str | None, forced: bool, *, idle: bool) -> Answer:
    if idle:
        message = f"subagent {view.name} has no turn running: nothing to interrupt, nothing was sent."
    elif sent == "nothing":
        message = (
            f"subagent {view.name}: its turn was stopped before its agent started (nothing needed a "
            "signal). The turn's end reaches you as usual."
        )
    elif sent is None:
        message = (
            f"subagent {view.name} is already stopping: its agent was sent SIGINT once and has not exited "
            "yet (nothing more is sent). status(name, wait_seconds) waits for its end."
        )
    elif sent == "session/cancel":
        message = (
            f"subagent {view.name}: sent session/cancel (SIGINT follows if the agent does not answer it). "
            "The name is free now; the turn's end reaches you as usual."
        )
    else:
        message = (
            f"subagent {view.name}: sent SIGINT. It is stopping until its agent has ended the turn and exited; "
            "continue is refused until then. The turn's end reaches you as usual."
        )
    if forced:
        message += " (force is ignored: an interrupt is always SIGINT.)"
    return Answer(message, {"message": message, "subagent": session_json(view), "sent": sent})


def _line(view: View, now: float) -> str:
    data = session_json(view, now)
    state = data["slot"] or "idle"
    head = f"{view.name}: {state} ({view.record.backend}"
    head += f", model {view.record.model}" if view.record.model else ""
    head += f", session {view.record.session_id})" if view.record.session_id else ", no session yet)"
    lines = [head]
    turn = data["turn"]
    if turn is not None:
        pids = ", ".join(map(str, turn["pids"])) or "none yet"
        lines.append(f"  turn {turn['number']}: {in_seconds(turn['running_secs'])} so far (agent pid {pids})")
    if state == "stopping":
        lines.append(
            "  stopping: its agent was sent SIGINT and has not exited yet; continue is refused until then"
        )
    last = data["last_turn"]
    if last is not None:
        error = ", an error" if last["is_error"] else ""
        lines.append(
            f"  last turn {last['number']}: {last['stop_reason']}{error} after {in_seconds(last['duration_secs'])}"
        )
        if last["result"]:
            lines.append("  result: " + last["result"].replace("\n", "\n    "))
        for error_text in last["errors"]:
            if error_text != last["result"]:
                lines.append(f"  error: {error_text}")
        if last["tokens"]:
            counts = ", ".join(f"{k} {v}" for k, v in last["tokens"].items() if isinstance(v, int))
            lines.append(f"  tokens: {counts}")
        if last["context"]:
            size = last["context"]["size"]
            share = f" of {size} ({100 * last['context']['used'] / size:.0f}%)" if size else ""
            lines.append(f"  context: {last['context']['used']}{share}")
    lines.append(f"  log: {data['log']}")
    return "\n".join(lines)


def _status(status: Status) -> Answer:
    now = time.time()
    if not status.views:
        message = "no subagents yet: start one with start(name, prompt)"
        return Answer(message, {"message": message, "subagents": []})
    running = sum(1 for v in status.views if v.slot is not None)
    message = f"{counted(len(status.views), 'subagent')}, {running} with a live turn"
    text = "\n".join(_line(view, now) for view in status.views)
    return Answer(
        text, {"message": message + ". " + text, "subagents": [session_json(v, now) for v in status.views]}
    )
