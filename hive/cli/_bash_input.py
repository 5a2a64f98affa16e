"""The command ``hive bash run`` runs: its words, stdin (``-``) or a file (``--file F``).

Linux limits one argument to 128 KiB (``MAX_ARG_STRLEN``): a longer command never reaches hive
as words, the shell fails it first ("Argument list too long"). So a command up to the tools' cap
(:data:`hive._limits.MAX_CMD_BYTES`) can come on stdin or from a file, which are read only up to
one byte past the cap: an endless stdin is refused, not read whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

from hive._limits import MAX_CMD_BYTES
from hive.errors import BadInput

STDIN = "-"
"""The word (alone after ``run``), or the ``--file``, that reads the command from stdin."""
ARG_MAX = 128 * 1024
"""Linux's limit on one argument (``MAX_ARG_STRLEN``), in bytes."""
CAP = f"{MAX_CMD_BYTES >> 20} MiB ({MAX_CMD_BYTES} bytes)"
"""The cap in words, for help and messages."""


class NoCommand(BadInput):
    """``hive bash run`` was given no command, an empty one, or more than one way to read it."""


class CommandTooLong(BadInput):
    """The command is over the cap the bash tools take."""


class UnreadableCommand(BadInput):
    """The command's file or stdin cannot be read, or does not hold UTF-8 text."""


def read_command(words: Sequence[str], file: str | None, stdin: BinaryIO | None) -> str:
    """The command that ``words`` (joined with one space, as ssh joins them) or ``file`` give.

    ``-`` as the only word, or ``--file -``, reads it from ``stdin``. Refused (`BadInput`,
    exit status 2) when there is none, both are given, it is empty, over the cap, or not text.
    """
    if file is not None and words:
        raise NoCommand("give the command one way: as words after `run`, or with --file, not both")
    if file is None and list(words) == [STDIN]:
        file = STDIN
    if file is None:
        if not words:
            raise NoCommand(
                "give the command to run: as words after `run` (quoted to keep it as written), "
                "`-` to read it from stdin, or --file F"
            )
        return _checked(" ".join(words), "the command")
    if file == STDIN:
        if stdin is None:
            raise UnreadableCommand("there is no stdin to read the command from (`-`): it is closed")
        return _checked(_read(stdin, "the command on stdin"), "the command on stdin")
    what = f"the command in {file}"
    try:
        with open(file, "rb") as opened:
            return _checked(_read(opened, what), what)
    except OSError as exc:
        raise UnreadableCommand(f"cannot read --file {file}: {exc.strerror or exc}") from None


def _read(stream: BinaryIO, what: str) -> str:
    """What ``stream`` holds, read to one byte past the cap, as UTF-8 text."""
    try:
        data = stream.read(MAX_CMD_BYTES + 1)
    except OSError as exc:
        raise UnreadableCommand(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_CMD_BYTES:
        raise CommandTooLong(f"{what} is over the cap of {CAP}; {_LONGER}")
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise UnreadableCommand(
            f"{what} is not UTF-8 text (its byte {exc.start} is not); fix its encoding"
        ) from None


_LONGER = "put a longer script in a file of its own and run `hive bash run bash FILE`"


def _checked(cmd: str, what: str) -> str:
    if not cmd.strip():
        raise NoCommand(f"{what} is empty: give the shell command to run")
    try:
        size = len(cmd.encode())
    except UnicodeEncodeError:
        raise UnreadableCommand(f"{what} is not UTF-8 text; fix its encoding") from None
    if size > MAX_CMD_BYTES:
        raise CommandTooLong(f"{what} is {size} bytes, over the cap of {CAP}; {_LONGER}")
    return cmd
