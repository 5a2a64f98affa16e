"""The one follow-a-file reader (hive._follow) and the one read of a file's end (hive._files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from hive._files import read_tail
from hive._follow import FollowedFile, follow_lines

GUARD = 10


def _all_lines(followed: FollowedFile, most: int) -> list[bytes]:
    lines = []
    while (appended := followed.read(most)).read:
        lines += appended.lines
    return lines


@given(
    st.lists(st.binary(max_size=40), max_size=12),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=1, max_value=50) | st.none(),
)
def test_appends_in_any_pieces_read_as_the_whole_lines_of_the_whole(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[bytes], most: int, tail: int | None
) -> None:
    path = tmp_path_factory.mktemp("follow") / "log"
    path.write_bytes(b"")
    followed, got = FollowedFile(path, tail), []
    for piece in pieces:
        with open(path, "ab") as file:
            file.write(piece)
        got += _all_lines(followed, most)
    begin = max(0, len(pieces[0]) - tail) if pieces and tail else 0  # the first read's start
    expected = b"".join(pieces)[begin:].split(b"\n")[:-1]
    assert got == (expected[1:] if begin else expected)  # the line the first read cut: left out


def test_a_file_replaced_or_cut_shorter_or_gone_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "log"
    followed = FollowedFile(path)
    assert followed.read() == followed.read()  # not there: nothing, never restarted
    path.write_bytes(b"one\ntwo\nthr")
    first = followed.read()
    assert (first.lines, first.restarted) == ([b"one", b"two"], True)
    replacement = tmp_path / "new"
    replacement.write_bytes(b"ee\nfour\n" * 4)
    os.replace(replacement, path)  # longer, but another file: its half line is not joined on
    again = followed.read()
    assert again.restarted and again.lines == [b"ee", b"four"] * 4
    path.write_bytes(b"five\n")  # cut shorter
    assert followed.read().lines == [b"five"]
    path.unlink()
    assert followed.read().restarted
    path.write_bytes(b"six\n")
    assert followed.read().lines == [b"six"]


def test_the_end_of_a_file_is_read_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "out"
    assert read_tail(path, 4) == (b"", 0)
    path.write_bytes(b"0123456789")
    assert read_tail(path, 4) == (b"6789", 10)
    assert read_tail(path, 40) == (b"0123456789", 10)


async def test_follow_lines_waits_for_a_file_to_come_and_grow(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with trio.fail_after(GUARD):
        lines = follow_lines(path)
        async with trio.open_nursery() as nursery:
            got: list[bytes] = []
            wanted = trio.Event()

            async def read() -> None:
                async for line in lines:
                    got.append(line)
                    if len(got) == 2:
                        wanted.set()
                        return

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            path.write_bytes(b"one\ntw")
            await trio.testing.wait_all_tasks_blocked()
            with open(path, "ab") as file:
                file.write(b"o\n")
            await wanted.wait()
        await lines.aclose()
    assert got == [b"one", b"two"]
