"""``hive bash tail ID [--follow] [--from-end N]``: a task's output, read from the daemon by offsets
(``status`` with ``stdout_offset`` / ``stderr_offset``), its stdout to stdout, its stderr to stderr.

With ``--follow`` each call waits for the output to grow (or for the task's end), so what the task
writes is printed as it writes it, and the command ends once the task has ended and all of its
output is printed, with the exit status ``hive bash run`` would give for it."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from hive._files import open_regular
from hive._limits import MAX_WAIT
from hive._main import take_sigint
from hive.cli._bash_answer import FAILED, exit_status, for_operator, tool_error_status

if TYPE_CHECKING:
    from hive.bash.client import CallResult

Caller = Callable[[argparse.Namespace, str, dict[str, Any]], "CallResult | None"]
"""Asks the daemon: ``call(args, tool, arguments)``; None (said on stderr) when it cannot."""

STREAMS = ("stdout", "stderr")
_READ = 1 << 16


def offset_of_last_lines(path: str, size: int, count: int) -> int:
    """Where the last ``count`` lines of the first ``size`` bytes of ``path`` start (a last line
    without its newline counts as a line). ``path`` is opened as a state file is (`open_regular`):
    anything but a regular file there is an `OSError`, never a wait on a FIFO."""
    if count <= 0:
        return size
    fd = open_regular(Path(path))
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        end = size - 1 if size and os.pread(fd, 1, size - 1) == b"\n" else size
        position, found = end, 0
        while position > 0:
            start = max(0, position - _READ)
            chunk = os.pread(fd, position - start, start)
            cut = len(chunk)
            while (cut := chunk.rfind(b"\n", 0, cut)) >= 0:
                found += 1
                if found == count:
                    return start + cut + 1
            position = start
    finally:
        os.close(fd)
    return 0


def bash_tail(args: argparse.Namespace, call: Caller) -> int:
    """Print the task's output as ``args`` asks; ``call(args, tool, arguments)`` asks the daemon."""
    if args.follow:
        take_sigint()
    first = call(args, "status", {"id": args.id})
    if first is None or first.is_error:
        return _failed(first)
    offsets = {stream: 0 for stream in STREAMS}
    if args.from_end is not None:
        try:
            for stream in STREAMS:
                shown = first.structured[stream]
                offsets[stream] = offset_of_last_lines(shown["path"], shown["bytes"], args.from_end)
        except OSError as exc:
            print(f"hive: cannot read the task's output to find its last lines: {exc}", file=sys.stderr)
            return FAILED
    try:
        return _print_from(args, call, offsets)
    except KeyboardInterrupt:
        return 130


def _print_from(args: argparse.Namespace, call: Caller, offsets: dict[str, int]) -> int:
    outputs: dict[str, BinaryIO] = {"stdout": sys.stdout.buffer, "stderr": sys.stderr.buffer}
    while True:
        arguments = {"id": args.id, "wait_seconds": MAX_WAIT if args.follow else 0}
        arguments |= {f"{stream}_offset": offset for stream, offset in offsets.items()}
        result = call(args, "status", arguments)
        if result is None or result.is_error:
            return _failed(result)
        info = result.structured
        for stream in STREAMS:
            outputs[stream].write(info[f"{stream}_new"].encode())
            outputs[stream].flush()
            offsets[stream] = info[f"{stream}_next"]
        if any(info[stream]["bytes"] > offsets[stream] for stream in STREAMS):
            continue  # more is there already
        if not args.follow:
            return 0
        if info.get("state") not in ("pending", "running"):
            code = exit_status(result)
            if code is None:
                print(
                    f"hive: the daemon answered a state this hive does not know: {info.get('state')!r}",
                    file=sys.stderr,
                )
            return FAILED if code is None else code


def _failed(result: CallResult | None) -> int:
    """No answer (said on stderr already), or a tool error, said now."""
    if result is None:
        return FAILED
    print(f"hive: {for_operator(result)}", file=sys.stderr)
    return tool_error_status(result)
