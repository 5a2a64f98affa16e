"""The text an operator gives a command (a prompt, a message, a shell command): its words, stdin
(``-``) or a file (``--file F``), one policy for every command that takes text.

Linux limits one argument to 128 KiB (``MAX_ARG_STRLEN``): longer text never reaches hive as words
(the shell fails the command first: "Argument list too long"), so every such command also reads
its text from stdin or a file, each read only to one byte past the command's cap (an endless
stdin is refused, not read whole). Standard library only: ``hive run`` reads its prompt before it
spawns its agent.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import BinaryIO

from hive.errors import BadInput

__all__ = ["ARG_MAX", "STDIN", "TextRefused", "TextTooLong", "in_words", "process_stdin", "read_text"]

STDIN = "-"
"""The word (alone), or the ``--file``, that reads the text from stdin."""
ARG_MAX = 128 * 1024
"""Linux's limit on one argument (``MAX_ARG_STRLEN``), in bytes."""


class TextRefused(BadInput):
    """The text is missing, given two ways, empty, or cannot be read as UTF-8 text."""


class TextTooLong(TextRefused):
    """The text is over the cap of the command that reads it."""


def in_words(size: int) -> str:
    """A size as help and messages give it: ``1 MiB (1,048,576 bytes)``."""
    if size % (1 << 20) == 0:
        return f"{size >> 20} MiB ({size:,} bytes)"
    return f"{size:,} bytes"


def read_text(
    words: Sequence[str],
    file: str | os.PathLike[str] | None,
    *,
    noun: str,
    cap: int,
    longer: str,
    blank: str,
    stdin: BinaryIO | None,
) -> str:
    """The ``noun`` (``prompt``, ``command``) that ``words`` give, joined with one space, or
    ``file``; ``-`` as the only word, or ``--file -``, reads ``stdin`` (None: there is none,
    it is closed; `process_stdin` gives this process's).

    Refused with a `TextRefused` (exit status 2) saying why and how to give it: none, two ways,
    not UTF-8 text, empty or only blanks (``blank``: what to give instead); a `TextTooLong` past
    ``cap`` bytes, saying ``longer`` (what to do with longer text).
    """
    if file is not None and words:
        raise TextRefused(f"give the {noun} one way: as words, as - (stdin) or with --file F, not two")
    if file is None and list(words) == [STDIN]:
        file = STDIN
    if file is None:
        if not words:
            raise TextRefused(
                f"no {noun}: give it as words (quoted to keep its spacing), - to read it from stdin, "
                "or --file F"
            )
        text, source = " ".join(words), "its words"
    elif os.fspath(file) == STDIN:
        text, source = _from_stdin(stdin, noun, cap, longer), "stdin"
    else:
        source = f"--file {os.fspath(file)}"
        try:
            with open(file, "rb") as opened:
                text = _decoded(_read(opened, source, noun, cap, longer), source, noun)
        except OSError as exc:
            raise TextRefused(f"cannot read {source}: {exc.strerror or exc}") from None
    if not text.strip():
        raise TextRefused(f"the {noun} is empty (or only blanks): {blank}")
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise TextRefused(f"the {noun} from {source} is not UTF-8 text: send it as text") from None
    if size > cap:
        raise TextTooLong(f"the {noun} is {size:,} bytes, over the cap of {in_words(cap)}; {longer}")
    return text


def process_stdin() -> BinaryIO | None:
    """This process's stdin as bytes, or None where it has none (closed at start)."""
    return sys.stdin.buffer if sys.stdin is not None else None


def _from_stdin(stdin: BinaryIO | None, noun: str, cap: int, longer: str) -> str:
    if stdin is None:
        raise TextRefused(f"- reads the {noun} from stdin, and there is none: give its words or --file F")
    if stdin.isatty():
        print(f"hive: reading the {noun} from stdin; end it with Ctrl-D", file=sys.stderr)
    try:
        data = _read(stdin, "stdin", noun, cap, longer)
    except OSError as exc:
        raise TextRefused(f"cannot read the {noun} from stdin: {exc.strerror or exc}") from None
    return _decoded(data, "stdin", noun)


def _read(stream: BinaryIO, source: str, noun: str, cap: int, longer: str) -> bytes:
    data = stream.read(cap + 1)
    if len(data) > cap:
        raise TextTooLong(f"the {noun} from {source} is over the cap of {in_words(cap)}; {longer}")
    return data


def _decoded(data: bytes, source: str, noun: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise TextRefused(
            f"the {noun} from {source} is not UTF-8 text (its byte {exc.start} is not): send it as text"
        ) from None
