"""Records on disk: round trips, atomic replacement, tails cut on character boundaries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive._files import write_atomic
from hive.bash.files._converter import RecordError, decode, encode
from hive.bash.files._records import LooseEnd, TaskRecord
from hive.bash.files._store import TAIL_BYTES, TaskStore, decode_tail, read_tail
from tests.helpers.strategies import loose_ends, records


@given(records)
def test_task_records_round_trip(record: TaskRecord) -> None:
    assert decode(encode(record), TaskRecord) == record


@given(loose_ends)
def test_loose_ends_round_trip(loose_end: LooseEnd) -> None:
    assert decode(encode(loose_end), LooseEnd) == loose_end


@given(st.binary())
def test_garbage_records_are_refused_with_record_error(data: bytes) -> None:
    try:
        result = decode(data, TaskRecord)
    except RecordError as exc:
        assert "not a TaskRecord" in str(exc)
    else:
        assert isinstance(result, TaskRecord)


def test_unknown_fields_from_a_newer_daemon_are_ignored() -> None:
    record = TaskRecord(id="a", serial="s", cmd="true", cwd="/", created_at=1.0)
    data = encode(record).replace(b'{"id"', b'{"from_the_future":1,"id"')
    assert decode(data, TaskRecord) == record


def test_a_record_missing_a_field_is_refused() -> None:
    with pytest.raises(RecordError, match="not a TaskRecord"):
        decode(b'{"id": "a"}', TaskRecord)


@given(st.text(), st.integers(min_value=1, max_value=64))
def test_a_tail_is_a_suffix_cut_on_a_character_boundary(text: str, limit: int) -> None:
    data = text.encode()
    tail = decode_tail(data[-limit:]) if len(data) > limit else data.decode()
    assert "\ufffd" not in tail or "\ufffd" in text
    assert text.endswith(tail)
    assert len(tail.encode()) >= min(len(data), limit) - 3


def test_read_tail_of_a_large_file(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text("é" * 10_000)
    tail = read_tail(path)
    assert tail.size == 20_000
    assert tail.truncated
    assert tail.text == "é" * (TAIL_BYTES // 2)
    assert read_tail(tmp_path / "missing").size == 0


def test_write_atomic_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_atomic(path, b"one")
    write_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path)) == ["r.json"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_unreadable_records_are_skipped_not_fatal(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.create_dirs()
    good = TaskRecord(id="good", serial="s", cmd="true", cwd="/", created_at=1.0)
    store.save_record(good)
    (store.tasks_dir / "torn.json").write_bytes(b'{"id": "torn", "ser')
    assert list(store.load_records()) == [good]


def test_a_loose_end_of_a_reused_name_is_not_deleted_by_the_old_task(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.create_dirs()
    store.save_loose_end(LooseEnd(task_id="build", serial="new", cmd="make", since=2.0))
    store.delete_loose_end("build", "old")
    assert store.load_loose_end("build") is not None
    store.delete_loose_end("build", "new")
    assert store.load_loose_end("build") is None


def test_an_exit_status_keeps_the_time_it_was_written_when_read_and_trimmed(tmp_path: Path) -> None:
    # A recovery that reads it and dies before saving its record leaves the next one the same end.
    store = TaskStore(tmp_path)
    store.create_dirs()
    with store.new_run("task", b"true") as files:
        os.write(files.exit, b"3\n")
    written_at = 1_700_000_000.25
    os.utime(store.exit_path("task"), (written_at, written_at))
    first = store.read_exit_status("task")
    assert first is not None and (first.code, first.written_at) == (3, written_at)
    assert store.exit_path("task").read_bytes() == b"3\n"
    assert store.read_exit_status("task") == first


def test_an_exit_file_with_no_status_has_none(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.create_dirs()
    with store.new_run("task", b"true"):
        pass
    assert store.read_exit_status("task") is None
    assert store.read_exit_status("never-ran") is None
