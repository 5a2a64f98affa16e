"""Which tasks' output files were written: one inotify instance for all of them (in-process, on real
files)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from hive.bash.procs._growth import GrowthWatch


async def test_a_write_names_its_task_and_a_removed_task_is_no_longer_named(tmp_path: Path) -> None:
    files = {name: (tmp_path / f"{name}.out", tmp_path / f"{name}.err") for name in ("a", "b")}
    for out, err in files.values():
        out.touch()
        err.touch()
    watch = GrowthWatch()
    try:
        for serial, paths in files.items():
            watch.add(serial, paths)
        with trio.fail_after(5):
            assert await watch.changed() == {"a", "b"}  # looked at once when added
            with files["b"][1].open("a") as err:
                err.write("x")
            assert await watch.changed() == {"b"}
            watch.remove("b")
            with files["b"][0].open("a") as out:
                out.write("x")
            with files["a"][0].open("a") as out:
                out.write("x")
            assert await watch.changed() == {"a"}
    finally:
        watch.close()


async def test_a_task_added_while_it_waits_is_looked_at(tmp_path: Path) -> None:
    path = tmp_path / "c.out"
    path.touch()
    watch = GrowthWatch()
    try:
        async with trio.open_nursery() as nursery:
            seen: list[set[str]] = []

            async def look() -> None:
                seen.append(await watch.changed())

            nursery.start_soon(look)
            await trio.testing.wait_all_tasks_blocked()
            watch.add("c", [path])
        assert seen == [{"c"}]
    finally:
        watch.close()
