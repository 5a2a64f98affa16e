"""The bash tools (`run`, `status`, `stop`, `list`): their specs, argument checking and behaviour.

Nothing here knows MCP: each tool takes the raw arguments and returns a :class:`ToolResult`
(text for the agent, structured content for programs). ``_server`` puts them on the wire.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from hive._arguments import ArgumentError, answer_schema, check_arguments, file_schema
from hive._limits import MAX_CMD_BYTES, MAX_NAME, MAX_WAIT, NAME_SCHEMA_PATTERN
from hive._when import counted, in_seconds
from hive.bash._errors import BadArgument, BashError
from hive.bash._model import HeldBy, StopReason, TaskState
from hive.bash._settings import LINE_SECONDS
from hive.bash._task_manager import Task, TaskManager
from hive.bash.ends._describe import describe_end, describe_status, shown_cmd, still_running, waiting
from hive.bash.ends._pattern import FEATURES, LINE_BYTES, MAX_PATTERN, TASK_SECONDS, compile_pattern
from hive.bash.ends._watch import DEFAULT_MAX, MAX_MAX, MERGE_SECS
from hive.bash.files._output import MAX_NEW_BYTES, STREAMS, read_past, read_tails, wait_grown

DEFAULT_RUN_WAIT = 3.0
DEFAULT_LIST_LIMIT = 50


@attrs.frozen
class ToolResult:
    """A tool's answer. ``structured`` always has a ``message``: the text's guidance, for a client
    that shows the model the structured content instead of the text (Claude Code does). An
    agent's error has none: its text is all it says."""

    text: str
    structured: dict[str, Any] | None
    is_error: bool = False
    delivered: Callable[[bool], None] | None = attrs.field(default=None, eq=False, repr=False)
    """For an answer that carries a task's end: call it once the answer has been written, with
    whether its client was still connected (only then has the agent seen the end)."""


@attrs.frozen
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


# -- output schemas -------------------------------------------------------------------------------

_ERRORS = "BadArgument, NameBusy, UnknownTask, DiskError, TaskLimit, SpawnError, ..."
"""The kinds of the bash tools' errors (``error`` in an answer)."""
_STATE = {"type": "string", "enum": [state.value for state in TaskState]}
_PLACE = {
    "type": ["integer", "null"],
    "minimum": 1,
    "description": "Only for a pending task: its place in the line of tasks waiting to run (1: the next "
    "to start), where the daemon runs at most so many at once (hive-bash-daemon --max-running); null "
    "for any other.",
}
_OUTPUT = {
    "type": "object",
    "properties": {
        "tail": {
            "type": "string",
            "description": "Its last 20 lines, at most 2 KiB (with full: its last 4 KiB), as UTF-8 "
            "(invalid bytes replaced).",
        },
        "bytes": {"type": "integer", "description": "The whole output's size (when tail is not all of it)."},
        "path": file_schema("the whole output (given when tail is not all of it)"),
    },
    "required": ["tail"],
}
_WITH_FULL = "Only with full."
_STATUS_PROPERTIES: dict[str, Any] = {
    "id": {"type": "string"},
    "state": _STATE,
    "exit_code": {"type": ["integer", "null"], "description": "Left out (with full: null) until it has one."},
    "duration_secs": {
        "type": ["number", "null"],
        "description": "Left out (with full: null) until it starts.",
    },
    "cmd": {
        "type": "string",
        "description": f"{_WITH_FULL} The command; one over 2000 characters is cut, see cmd_path.",
    },
    "cmd_path": file_schema("the whole command"),
    "cwd": {"type": "string", "description": _WITH_FULL},
    "pid": {"type": ["integer", "null"], "description": _WITH_FULL},
    "timeout_secs": {"type": ["number", "null"], "description": _WITH_FULL},
    "stop_reason": {
        "type": ["string", "null"],
        "enum": [*(r.value for r in StopReason), None],
        "description": _WITH_FULL,
    },
    "signals": {"type": "array", "items": {"type": "string"}, "description": _WITH_FULL},
    "notes": {
        "type": "array",
        "items": {"type": "string"},
        "description": f"{_WITH_FULL} Each is a `note:` line of the message too.",
    },
    "held_by": {
        "type": ["string", "null"],
        "enum": [*(h.value for h in HeldBy), None],
        "description": f"{_WITH_FULL} What holds every process of the task, so that a stop reaches them all: "
        "`cgroup` (a cgroup v2 of its own) or `subreaper` (its group, its environment tag, the daemon "
        "as subreaper); null for a task recorded by a daemon that did not say.",
    },
    "created_at": {"type": "number", "description": _WITH_FULL},
    "started_at": {"type": ["number", "null"], "description": _WITH_FULL},
    "ended_at": {"type": ["number", "null"], "description": _WITH_FULL},
    "place_in_line": _PLACE,
    "stdout": {**_OUTPUT, "description": "Left out when it is empty (but with full)."},
    "stderr": {**_OUTPUT, "description": "Left out when it is empty (but with full)."},
    "wake": {
        "type": ["string", "null"],
        "description": f"{_WITH_FULL} Only while the task has not ended: who will wake you when it ends, "
        "bash-task-<id>; null when no wake will follow (the message says so either way).",
    },
}
_STATUS_REQUIRED = ["id", "state"]
_FULL = {
    "type": "boolean",
    "default": False,
    "description": "Also answer what programs read: the task's command, cwd, pid, timeout, signals, "
    "notes, what holds it, its times, and every stream's tail (4 KiB), size and path.",
}
_STARTED_PROPERTIES: dict[str, Any] = {
    "stdout_path": file_schema(f"its whole stdout. {_WITH_FULL}"),
    "stderr_path": file_schema(f"its whole stderr. {_WITH_FULL}"),
    "previous": {
        "type": "object",
        "description": "The earlier task of the same name, whose end you had not been told yet.",
        "properties": {
            "id": {"type": "string"},
            "state": _STATE,
            "exit_code": {"type": ["integer", "null"]},
        },
        "required": ["id", "state", "exit_code"],
    },
}
_LIST_PROPERTIES: dict[str, Any] = {
    "tasks": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "state": _STATE,
                "exit_code": {"type": ["integer", "null"]},
                "duration_secs": {"type": ["number", "null"]},
                "cmd": {"type": "string"},
                "created_at": {"type": "number"},
                "place_in_line": _PLACE,
            },
            "required": ["id", "state", "exit_code", "duration_secs", "cmd", "created_at"],
        },
    },
    "total": {"type": "integer", "description": "How many tasks the daemon knows."},
}


def _offset_schema(stream: str) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 0,
        "description": f"Read the task's {stream} from this byte (0: from its start): the answer's "
        f"{stream}_new holds what is there, up to {MAX_NEW_BYTES // 1024} KiB, and {stream}_next the "
        f"offset to pass next time. Reading consumes nothing; an offset past the end is refused.",
    }


def _new_schema(stream: str) -> dict[str, Any]:
    return {
        f"{stream}_new": {
            "type": "string",
            "description": f"Only with {stream}_offset: the {stream} from that byte on, as UTF-8 (invalid "
            f"bytes replaced), up to {MAX_NEW_BYTES // 1024} KiB, ending on a whole character.",
        },
        f"{stream}_next": {
            "type": "integer",
            "description": f"Only with {stream}_offset: the {stream}_offset to pass next time.",
        },
    }


_WAIT_DESCRIPTION = (
    f"Seconds to wait for the task to finish before answering (0 to {MAX_WAIT:g}; larger values are "
    f"capped at {MAX_WAIT:g}). If it finishes in time you get its status at once."
)

TOOLS = [
    ToolSpec(
        "run",
        "Run a shell command with bash (as `bash -c CMD` would: arrays, [[ ]], brace expansion and "
        f"pipefail work; up to {MAX_CMD_BYTES // 1024} KiB) in the background. Its stdout and stderr go "
        "to files (`status` gives their paths). If the command finishes within wait_seconds (default 3) you get "
        "its status (exit code, last output lines) right away and no wake follows. Otherwise the answer is `task started: id=<id>`, "
        "the task keeps running, and when it ends you are woken by a message from `bash-task-<id>` with "
        "its exit code, its notes and its last stdout lines. Use `status` to check on it or wait for it, `stop` to end it. "
        "Where the daemon runs at most so many tasks at once and all are taken, the task waits in line "
        "(state `pending`, with its place_in_line: `task queued: id=<id>`) and starts when a running task "
        "ends; its timeout_secs counts from its start.",
        {
            "type": "object",
            "properties": {
                "cmd": {
                    "type": "string",
                    "minLength": 1,
                    "description": f"The command, run by bash as `bash -c CMD` would run it "
                    f"(at most {MAX_CMD_BYTES} bytes of UTF-8).",
                },
                "timeout_secs": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Stop the task after this many seconds and mark it timed_out "
                    "(SIGINT to every process it started, SIGKILL after a grace period). Omit for no timeout.",
                },
                "wait_seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_WAIT,
                    "default": DEFAULT_RUN_WAIT,
                    "description": _WAIT_DESCRIPTION + " Pass 0 to get the task id back at once.",
                },
                "name": {
                    "type": "string",
                    "pattern": NAME_SCHEMA_PATTERN,
                    "description": "A memorable id for the task instead of a random one (letters, digits, "
                    f"'.', '_', '-'; up to {MAX_NAME}). It names the wake (`bash-task-<name>`). A name can be "
                    "reused once its previous task has finished.",
                },
                "notify_on": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATTERN,
                    "description": "Wake me when a line of the task's stdout or stderr matches this regular "
                    f"expression ({FEATURES}; searched in each line, a line longer than {LINE_BYTES >> 10} "
                    "KiB in pieces of that length), e.g. `listening on|FAILED|Traceback`: a message from "
                    "`bash-task-<id>` starting `bash task <id> printed:`, with the matching lines. Matches "
                    f"within {in_seconds(MERGE_SECS)} come in one wake; at most notify_max wakes a task, then "
                    "one saying later matches are not sent. A pattern whose search of one line takes over "
                    f"{in_seconds(LINE_SECONDS)} of CPU time, or of all the task's lines over {in_seconds(TASK_SECONDS)}, is "
                    "dropped from the task, with a wake that says so. The end's wake is separate.",
                },
                "notify_max": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_MAX,
                    "description": f"With notify_on: the most match wakes this task sends (default {DEFAULT_MAX}).",
                },
                "full": _FULL,
            },
            "required": ["cmd"],
            "additionalProperties": False,
        },
        answer_schema(
            {**_STATUS_PROPERTIES, **_STARTED_PROPERTIES},
            _STATUS_REQUIRED,
            errors=_ERRORS,
        ),
    ),
    ToolSpec(
        "status",
        "The status of a task started with `run`: state (pending: waiting in line for a place to run, "
        "running, done, timed_out, stopped, interrupted), exit code, duration, and the last 20 lines (at most 2 KiB) of stdout and of stderr, with "
        "where the whole output is when that is not all of it. `interrupted` means its process was gone after a daemon restart with no "
        "exit status recorded. To follow a task's output as it is written, pass stdout_offset (and/or "
        "stderr_offset), starting at 0, with wait_seconds: the answer comes as soon as there is new output "
        "and carries it as stdout_new, with stdout_next, the offset to pass next time. An end shown to you "
        "here (or by `run` or `stop`) is not sent again as a wake; an operator watching the same task does "
        "not take your wake.",
        {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The id `run` returned, or the name you gave it."},
                "wait_seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_WAIT,
                    "default": 0,
                    "description": _WAIT_DESCRIPTION
                    + " With stdout_offset or stderr_offset, the answer comes as soon as there is output past "
                    "the offset (or the task ends), so you can follow a task's output as it is written.",
                },
                **{f"{stream}_offset": _offset_schema(stream) for stream in STREAMS},
                "full": _FULL,
            },
            "required": ["id"],
            "additionalProperties": False,
        },
        answer_schema(
            {**_STATUS_PROPERTIES, **_new_schema("stdout"), **_new_schema("stderr")},
            _STATUS_REQUIRED,
            errors=_ERRORS,
        ),
    ),
    ToolSpec(
        "stop",
        "Stop a running task (or take a pending one out of the line: it never runs): SIGINT to every process it started (its process group, and any that left it "
        "with setsid or a new group), and SIGKILL to whatever is still alive after the grace period. Answers "
        "with the task's status once it has ended; its message says it was stopped, which signals it took, "
        "and (in its notes) which processes outside its group were signalled.",
        {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The task's id or name."}, "full": _FULL},
            "required": ["id"],
            "additionalProperties": False,
        },
        answer_schema(_STATUS_PROPERTIES, _STATUS_REQUIRED, errors=_ERRORS),
    ),
    ToolSpec(
        "list",
        "The tasks the daemon knows, newest first: id, state, exit code, duration and command, and each "
        "pending task's place in the line of tasks waiting to run (`pending #2` in the text).",
        {
            "type": "object",
            "properties": {
                "limit": {
                    "type": "integer",
                    "minimum": 0,
                    "default": DEFAULT_LIST_LIMIT,
                    "description": f"At most this many tasks (default {DEFAULT_LIST_LIMIT}); 0 for all of them.",
                }
            },
            "additionalProperties": False,
        },
        answer_schema(_LIST_PROPERTIES, ["tasks", "total"], errors=_ERRORS),
    ),
]


# -- argument checking (beyond what the schemas say: see hive._arguments) ------------------------

_SPECS = {spec.name: spec for spec in TOOLS}
_CAPPED = {"wait_seconds": MAX_WAIT}


def _task_id(args: Mapping[str, Any]) -> str:
    value: str = args["id"]
    if not value:
        raise BadArgument("id is required: the id `run` returned, or the task's name")
    return value


# -- rendering ------------------------------------------------------------------------------------


async def status_of(
    manager: TaskManager,
    task: Task,
    clock: Callable[[], float],
    offsets: Mapping[str, int] | None = None,
    *,
    full: bool,
) -> ToolResult:
    """The task's status, with its output's tails (read in a worker thread), and with what the
    streams named in ``offsets`` hold past their offsets; ``full``: every field of it, else
    what an agent acts on."""
    new = await read_past(manager.store, manager.reads, task, offsets) if offsets else []
    out, err = await read_tails(manager.store, manager.reads, task.id)
    now = clock()
    cmd_path = str(manager.store.cmd_path(task.id))
    wakes = manager.courier.agent_socket is not None
    text, structured = describe_status(
        task.record,
        out,
        err,
        now,
        cmd_path,
        wakes=wakes,
        new=new,
        place=manager.place(task),
        limit=manager.settings.max_running,
        full=full,
    )
    return ToolResult(text, structured)


def _started(task: Task, manager: TaskManager, *, full: bool) -> ToolResult:
    """The answer of a `run` whose task has not ended (or whose end comes as a wake): for an
    agent (not ``full``) its id, state and what to do next; the paths are in a full status."""
    tid = task.id
    out, err = manager.store.out_path(tid), manager.store.err_path(tid)
    wakes = manager.courier.agent_socket is not None
    place = manager.place(task)
    if place is None:
        first = f"task started: id={tid}"
    else:
        first = f"task queued: id={tid} ({waiting(place, manager.settings.max_running)})"
    guidance = f"{first}\n{still_running(tid, wakes=wakes, pending=place is not None)}"
    text = f"{guidance}\nstdout: {out}\nstderr: {err}"
    if not full:
        brief: dict[str, Any] = {"id": tid, "state": "pending" if place is not None else "running"}
        if place is not None:
            brief["place_in_line"] = place
        return ToolResult(text, brief | {"message": guidance})
    structured = {
        "id": tid,
        "state": "pending" if place is not None else "running",
        "place_in_line": place,
        "stdout_path": str(out),
        "stderr_path": str(err),
        "wake": f"bash-task-{tid}" if wakes else None,
        "message": text,
    }
    return ToolResult(text, structured)


def _preceded(result: ToolResult, line: str, **extra: Any) -> ToolResult:
    """``result`` with ``line`` before its text and its message."""
    assert result.structured is not None
    structured = {**result.structured, **extra, "message": f"{line}\n{result.structured['message']}"}
    return attrs.evolve(result, text=f"{line}\n{result.text}", structured=structured)


def _error(text: str, kind: str, *, full: bool) -> ToolResult:
    """A tool error: its text, and for a program (``full``) its kind as structured content."""
    return ToolResult(text, {"error": kind, "message": text} if full else None, is_error=True)


def _asks_full(arguments: Mapping[str, Any] | None) -> bool:
    """Whether a call asks for a program's answer (``full``), however its other arguments are."""
    return isinstance(arguments, Mapping) and arguments.get("full") is True


def _check_cmd(cmd: str) -> str:
    if not cmd.strip():
        raise BadArgument("cmd is empty: give the shell command to run")
    if "\0" in cmd:
        raise BadArgument("cmd contains a NUL character, which no shell command can hold; remove it")
    try:
        size = len(cmd.encode())
    except UnicodeEncodeError:
        raise BadArgument(
            "cmd is not valid Unicode text (it holds a lone surrogate); fix its encoding"
        ) from None
    if size > MAX_CMD_BYTES:
        raise BadArgument(
            f"cmd is {size} bytes, over the cap of {MAX_CMD_BYTES} bytes ({MAX_CMD_BYTES >> 20} MiB); write a script that long "
            "to a file and run `bash FILE` instead"
        )
    return cmd


# -- the tools ------------------------------------------------------------------------------------


@attrs.define(eq=False)
class BashTools:
    """The bash tools (``run``, ``status``, ``stop``, ``list``) over one task manager: checked arguments in, a tool result out."""

    manager: TaskManager
    clock: Callable[[], float] = time.time

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None, *, traceparent: str | None = None
    ) -> ToolResult:
        """Run tool ``name``; a caller's mistake comes back as an error result, never an exception.
        ``traceparent``: the span the call was made in (a task `run` starts is its child)."""
        handler = self._handlers(traceparent).get(name)
        full = _asks_full(arguments)
        if handler is None:
            return _error(
                f"unknown tool {name!r}; the bash tools are {', '.join(t.name for t in TOOLS)}",
                "unknown_tool",
                full=full,
            )
        try:
            args = check_arguments(_SPECS[name].input_schema, arguments, capped=_CAPPED)
            return await handler(args)
        except ArgumentError as exc:
            return _error(str(exc), "BadArgument", full=full)
        except BashError as exc:
            return _error(str(exc), type(exc).__name__, full=full)

    def _handlers(
        self, traceparent: str | None
    ) -> dict[str, Callable[[dict[str, Any]], Awaitable[ToolResult]]]:
        run = functools.partial(self.run, traceparent=traceparent)
        return {"run": run, "status": self.status, "stop": self.stop, "list": self.list}

    async def run(self, args: dict[str, Any], *, traceparent: str | None = None) -> ToolResult:
        """Start a task and wait up to ``wait_seconds`` for its end; the end if it came, else that it runs."""
        cmd = _check_cmd(args["cmd"])
        timeout: float | None = args.get("timeout_secs")
        wait: float = args["wait_seconds"]
        name: str | None = args.get("name")
        notify_on: str | None = args.get("notify_on")
        notify_max: int | None = args.get("notify_max")
        full: bool = args["full"]
        if notify_on is not None:
            compile_pattern(notify_on)
        elif notify_max is not None:
            raise BadArgument("notify_max is given without notify_on: give the pattern to watch for too")

        # `start` holds the task for this call: released here, or once the answer is written.
        task, previous = await self.manager.start(
            cmd,
            name=name,
            timeout_secs=timeout,
            notify_on=notify_on,
            notify_max=notify_max,
            traceparent=traceparent,
        )
        try:
            with trio.move_on_after(wait):
                await task.ended.wait()
            if not (task.final and wait > 0):
                # Told it started: then it must survive a power cut (an answer that tells
                # its end needs no such thing).
                await task.durable.wait()
        except BaseException:
            # The caller will never read this answer, so the ends are owed to it as wakes.
            self.manager.release(task, told=False)
            if previous is not None:
                self.manager.release(previous, told=False)
            raise
        if task.final and wait > 0:
            result = await self._ended(task, full=full)
        else:
            # wait_seconds=0 always answers at once; the end, even an immediate one, comes as a wake.
            result = _started(task, self.manager, full=full)
            self.manager.release(task, told=False)
        if previous is None:
            return result
        told_of_this = result.delivered
        manager = self.manager

        def delivered(connected: bool) -> None:
            # The previous end is told by this answer, if it reaches a client still connected.
            manager.release(previous, told=connected)
            if told_of_this is not None:
                told_of_this(connected)

        ended = previous.record
        return attrs.evolve(
            _preceded(
                result,
                f"(the previous task named {ended.id} had ended: {describe_end(ended)})",
                previous={"id": ended.id, "state": ended.state.value, "exit_code": ended.exit_code},
            ),
            delivered=delivered,
        )

    async def status(self, args: dict[str, Any]) -> ToolResult:
        """A task's state and its output's tail (or what grew past an offset), after waiting for its end if asked."""
        wait: float = args["wait_seconds"]
        offsets: dict[str, int] = {
            stream: args[f"{stream}_offset"] for stream in STREAMS if f"{stream}_offset" in args
        }
        task = self.manager.get(_task_id(args))
        self.manager.hold(task)
        try:
            with trio.move_on_after(wait):
                if offsets:
                    await wait_grown(self.manager.store, self.manager.reads, task, offsets)
                else:
                    await task.ended.wait()
        except BaseException:
            self.manager.release(task, told=False)
            raise
        return await self._answer(task, offsets, full=args["full"])

    async def stop(self, args: dict[str, Any]) -> ToolResult:
        """SIGINT to a task's processes, and its end once they are gone (nothing more forceful, ever)."""
        task = self.manager.get(_task_id(args))
        self.manager.hold(task)
        if task.final:
            answer = await self._answer(task, full=args["full"])
            return _preceded(answer, f"task {task.id} had already ended; nothing to stop.")
        try:
            self.manager.request_stop(task)
            with trio.move_on_after(self.manager.settings.kill_grace + 5.0):
                await task.ended.wait()
        except BaseException:
            self.manager.release(task, told=False)
            raise
        return await self._answer(task, full=args["full"])

    async def _answer(
        self, task: Task, offsets: Mapping[str, int] | None = None, *, full: bool
    ) -> ToolResult:
        """The status of a task this call holds; the hold ends now, or once an end is written."""
        if task.final:
            return await self._ended(task, offsets, full=full)
        self.manager.release(task, told=False)
        return await status_of(self.manager, task, self.clock, offsets, full=full)

    async def _ended(self, task: Task, offsets: Mapping[str, int] | None = None, *, full: bool) -> ToolResult:
        """The final status of a task this call holds: told once the answer reaches its client."""
        manager = self.manager
        try:
            result = await status_of(manager, task, self.clock, offsets, full=full)
        except BaseException:
            manager.release(task, told=False)
            raise

        def delivered(connected: bool) -> None:
            manager.release(task, told=connected)

        return attrs.evolve(result, delivered=delivered)

    async def list(self, args: dict[str, Any]) -> ToolResult:
        """The tasks the daemon knows, newest first, at most ``limit``."""
        limit: int = args["limit"]
        now = self.clock()
        records = self.manager.newest_first()
        shown = records[:limit] if limit else records
        rows = []
        lines = []
        for r in shown:
            place = self.manager.line.place((r.id, r.serial))
            duration = r.duration(now)
            cmd = shown_cmd(r.cmd, str(self.manager.store.cmd_path(r.id)))
            rows.append(
                {
                    "id": r.id,
                    "state": r.state.value,
                    "exit_code": r.exit_code,
                    "duration_secs": None if duration is None else round(duration, 3),
                    "cmd": cmd,
                    "created_at": r.created_at,
                    "place_in_line": place,
                }
            )
            code = "-" if r.exit_code is None else str(r.exit_code)
            took = "-" if duration is None else in_seconds(duration)
            state = r.state.value if place is None else f"{r.state.value} #{place}"
            lines.append(f"{r.id}\t{state}\t{code}\t{took}\t{cmd}")
        text = "\n".join(["id\tstate\texit\tduration\tcommand", *lines]) if lines else "no tasks yet"
        message = (
            f"{len(shown)} of {counted(len(records), 'task')}, newest first" if lines else "no tasks yet"
        )
        if len(shown) < len(records):
            older = f"({counted(len(records) - len(shown), 'older task')} not shown; pass limit=0 for all)"
            text += f"\n{older}"
            message += f" {older}"
        return ToolResult(text, {"tasks": rows, "total": len(records), "message": message})
