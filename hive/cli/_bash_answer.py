"""The daemon's answers as the operator reads them, and the exit status each makes.

The daemon's messages are written for an agent calling its MCP tools: they name the tools and
their arguments, and promise the agent a wake. Here they are told in the terms of ``hive bash``,
and a task still running says whether its end will wake the agent, as the daemon's answer tells.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hive._limits import MAX_WAIT

if TYPE_CHECKING:
    from hive.bash.client import CallResult

STILL_RUNNING = 0
TIMED_OUT = 124
"""As timeout(1) exits when its command timed out."""
STOPPED = 125
"""As xargs(1) exits when its command was killed by a signal."""
INTERRUPTED = 75
"""EX_TEMPFAIL (sysexits.h): the outcome is unknown, run the command again."""
FAILED = 1
BAD_INPUT = 2

STATE_STATUS = {
    "pending": STILL_RUNNING,
    "running": STILL_RUNNING,
    "timed_out": TIMED_OUT,
    "stopped": STOPPED,
    "interrupted": INTERRUPTED,
}
"""The exit status of ``hive bash run``/``status`` for every state but ``done`` (which exits
with the task's own status)."""

EXIT_STATUS_HELP = f"""\
exit status of `run` and `status` (the same with --json):
  0-255  the task is done: its own exit status
  {STILL_RUNNING}      the task is still running when the answer comes, or still waits in line
         (`pending`: the daemon runs at most --max-running tasks at once)
  {TIMED_OUT}    the task timed out (--timeout), as timeout(1) says
  {STOPPED}    the task was stopped (`hive bash stop`, the agent's stop, or the output cap)
  {INTERRUPTED}     the task was interrupted: its process was gone after a restart and no exit
         status was recorded (EX_TEMPFAIL: run it again)
  {FAILED}      hive failed: the daemon cannot be reached, no task has that id, ...
  {BAD_INPUT}      bad input: a flag, an argument, a command over the cap or that cannot be read
  130    hive was interrupted (Ctrl-C); the task runs on
hive's own failures ({FAILED}, {BAD_INPUT}) are told in a line `hive: ...` on stderr and print no status
(with --json, an object with `error`): that tells them apart from a task's own {FAILED} or {BAD_INPUT}.
`stop` and `ls` exit 0 when they did what was asked, else {FAILED} or {BAD_INPUT} as above."""


def exit_status(result: CallResult) -> int | None:
    """The exit status of ``hive bash run`` or ``status`` answered ``result``; None for an answer
    whose state this CLI does not know (a failure of its own to tell)."""
    if result.is_error:
        return tool_error_status(result)
    info = result.structured
    state = info.get("state")
    if state == "done":
        code = info.get("exit_code")
        return code if isinstance(code, int) and 0 <= code <= 255 else None
    return STATE_STATUS.get(state) if isinstance(state, str) else None


def tool_error_status(result: CallResult) -> int:
    """A tool error's exit status: bad input for a refused argument, else a failure."""
    return BAD_INPUT if result.structured.get("error") == "BadArgument" else FAILED


# The tools' calls and argument names, rewritten into the commands and flags of `hive bash`.
_CLI_TERMS = [
    (re.compile(r"\bstatus\('([^']*)', wait_seconds=([0-9.]+)\)"), r"`hive bash status \1 --wait \2`"),
    (re.compile(r"\bstop\('([^']*)'\)"), r"`hive bash stop \1`"),
    (re.compile(r"`list`"), "`hive bash ls`"),
    (re.compile(r"`(run|status|stop)`"), r"`hive bash \1`"),
    (re.compile(r"\bwait_seconds\b"), "--wait"),
    (re.compile(r"\btimeout_secs\b"), "--timeout"),
    (re.compile(r"\bnotify_on\b"), "--notify-on"),
    (re.compile(r"\bnotify_max\b"), "--notify-max"),
]


def in_cli_terms(text: str) -> str:
    """``text``, a message of the daemon's, with its tools and arguments named as ``hive bash`` names them."""
    for pattern, replacement in _CLI_TERMS:
        text = pattern.sub(replacement, text)
    return text


def _next_steps(task_id: object, *, pending: bool = False) -> str:
    runs = "It waits in line, then runs in the background" if pending else "It runs in the background"
    return (
        f"{runs}: `hive bash status {task_id} --wait {MAX_WAIT:g}` waits for it, "
        f"`hive bash stop {task_id}` ends it."
    )


def _at_its_end(task_id: object, wake: object) -> str:
    """What happens when the task ends, as the daemon's ``wake`` tells: who it wakes, if anyone."""
    if isinstance(wake, str):
        return (
            f"When it ends, the daemon sends its end to the agent as a wake from {wake}, which starts a turn."
        )
    return "The daemon has no agent socket: no agent is woken when it ends."


def for_operator(result: CallResult) -> str:
    """A tool's answer as the operator reads it.

    The daemon's text is for the agent: it names the MCP tools, and it promises a wake, which
    reaches the agent (if the daemon has an agent socket at all), never the operator. So the
    answer of a `run` still going is told from its structured content, and in a status the line
    on what to do about a running task is replaced, with whether its end wakes the agent (the
    answer's ``wake``); the output tails are left as they are.
    """
    info = result.structured
    if result.is_error:
        return in_cli_terms(result.text)
    task_id = info.get("id")
    if "stdout_path" in info and "stdout" not in info:  # `run` answered before its task ended
        place = info.get("place_in_line")
        pending = info.get("state") == "pending"
        first = (
            f"task queued: id={task_id} (pending, number {place} in line)"
            if pending
            else f"task started: id={task_id}"
        )
        lines = [first, _next_steps(task_id, pending=pending)]
        if "wake" in info:
            lines.append(_at_its_end(task_id, info["wake"]))
        lines += [f"stdout: {info.get('stdout_path')}", f"stderr: {info.get('stderr_path')}"]
        previous = info.get("previous")
        if isinstance(previous, dict):
            code = previous.get("exit_code")
            ended = f"{previous.get('state')}" + (f", exit code {code}" if code is not None else "")
            lines.insert(0, f"(the previous task named {previous.get('id')} had ended: {ended})")
        return "\n".join(lines)
    lines = result.text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("--- stdout"):
            break  # the output follows: the task's own words, not the daemon's
        if line.startswith(("It runs in the background", "It waits in line")):
            steps = [_next_steps(task_id, pending=line.startswith("It waits"))]
            if "wake" in info:
                steps.append(_at_its_end(task_id, info["wake"]))
            lines[i] = "\n".join(steps)
    return "\n".join(lines)
