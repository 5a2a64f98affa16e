"""hive._text_input: the one policy for text an operator gives a command (``hive run``'s prompt,
``hive agent prompt``'s message, ``hive bash run``'s command): words, ``-`` or ``--file``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._text_input import TextRefused, TextTooLong, in_words, read_text

CAP = 64


def read(words: list[str], file: str | None = None, stdin: bytes | None = b"") -> str:
    source = io.BytesIO(stdin) if stdin is not None else None
    return read_text(words, file, noun="note", cap=CAP, longer="split it", blank="write one", stdin=source)


@given(st.binary(max_size=2 * CAP))
def test_stdin_is_the_text_read_once_to_one_byte_past_the_cap(data: bytes) -> None:
    source = io.BytesIO(data * 2)
    try:
        text = read_text(
            ["-"], None, noun="note", cap=CAP, longer="split it", blank="write one", stdin=source
        )
    except TextTooLong as refused:
        assert len(data * 2) > CAP and "over the cap of 64 bytes; split it" in str(refused)
        assert source.tell() == CAP + 1  # an endless stdin is never read whole
    except TextRefused as refused:
        assert "empty" in str(refused) or "not UTF-8" in str(refused)
        assert refused.exit_code == 2
    else:
        assert text.encode() == data * 2 and text.strip()


def test_the_three_ways_give_the_same_text_and_two_at_once_are_refused(tmp_path: Path) -> None:
    (tmp_path / "note").write_bytes(b"look at  the test")
    assert read(["look at ", "the test"]) == "look at  the test"
    assert read(["-"], stdin=b"look at  the test") == "look at  the test"
    assert read([], str(tmp_path / "note")) == "look at  the test"
    assert read([], "-", stdin=b"look at  the test") == "look at  the test"
    for words in (["x"], ["-"]):
        with pytest.raises(TextRefused, match="give the note one way"):
            read(words, str(tmp_path / "note"))


@pytest.mark.parametrize(
    ("words", "file", "stdin", "says"),
    [
        ([], None, b"", "no note: give it as words (quoted to keep its spacing), - to read it from stdin"),
        ([" ", "\t"], None, b"", "the note is empty (or only blanks): write one"),
        (["-"], None, None, "- reads the note from stdin, and there is none"),
        (["-"], None, b"caf\xe9", "the note from stdin is not UTF-8 text (its byte 3 is not)"),
        ([], "/nonexistent/note", b"", "cannot read --file /nonexistent/note: No such file or directory"),
        (["y" * 40, "z" * 40], None, b"", "the note is 81 bytes, over the cap of 64 bytes; split it"),
    ],
)
def test_what_is_refused_says_why_and_how_to_give_it(
    words: list[str], file: str | None, stdin: bytes | None, says: str
) -> None:
    with pytest.raises(TextRefused) as refused:
        read(words, file, stdin)
    assert str(refused.value).startswith(says), str(refused.value)


def test_sizes_read_as_the_help_gives_them() -> None:
    assert in_words(1 << 20) == "1 MiB (1,048,576 bytes)"
    assert in_words(64) == "64 bytes"
