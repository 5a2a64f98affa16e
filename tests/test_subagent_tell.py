"""Who hears of a subagent turn's end: the status call waiting for it, else a wake; and the layers."""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from pathlib import Path

import trio

from hive.subagent._tools import SubagentTools
from tests.helpers.subagents import Courier, World, serving, turn_done

TURN = 60
SUBAGENT = Path(__file__).resolve().parent.parent / "hive" / "subagent"


async def test_an_end_a_status_call_showed_is_told_once_the_harness_took_its_shown_wake(world: World) -> None:
    """Under a harness (an agent socket) the answer's agent may die before it reads it: the end
    goes to the harness marked shown (when), which the turn it was shown in settles."""
    world.claude.script("default")
    courier = Courier()
    acks: list[Callable[[str], None]] = []
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: acks.append(acked) or courier) as manager:
            manager.start("w", "hi", world.caller())
            status = await manager.status("w", wait=30)
            before = time.time()
            status.delivered(True)
            ((key, wake),) = courier.sent
            assert wake.shown_at is not None and before <= wake.shown_at <= time.time()
            assert wake.end_id == f"subagent-{key}" and "ended turn 1 (completed)" in wake.body
            assert manager.records["w"].last is not None and not manager.records["w"].last.told
            acks[0](key)
    assert status.views[0].record.last is not None and status.views[0].record.last.told


async def test_an_end_whose_waiting_answer_was_not_delivered_wakes_the_caller(world: World) -> None:
    world.claude.script("default")
    courier = Courier()
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            manager.start("g", "hi", world.caller())
            status = await manager.status("g", wait=30)
            assert courier.sent == []  # its answer may yet reach the caller
            status.delivered(False)  # it did not: the client went away
    ((key, wake),) = courier.sent
    assert wake.sender == "subagent-g" and wake.end_id == f"subagent-{key}"
    assert "ended turn 1 (completed)" in wake.body and "fake claude reply to: hi" in wake.body


async def test_an_end_nobody_waited_for_wakes_the_caller_and_a_later_status_marks_it_shown(
    world: World,
) -> None:
    world.claude.script("default")
    courier = Courier()
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            manager.start("n", "hi", world.caller())
            await courier.arrived.wait()
            shown = await manager.status()
            shown.delivered(True)
    ((key, woken), (again, marked)) = courier.sent
    assert key == again and woken.shown_at is None and marked.shown_at is not None
    assert courier.withdrawn == []
    assert manager.records["n"].last is not None and not manager.records["n"].last.told


async def test_with_no_agent_socket_an_answer_that_showed_the_end_tells_it(world: World) -> None:
    world.claude.script("default")
    courier = Courier()
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            manager.start("x", "hi", world.caller(wakes=False))
            status = await manager.status("x", wait=30)
            status.delivered(True)
    assert manager.records["x"].last is not None and manager.records["x"].last.told
    assert courier.sent == []


async def test_no_agent_socket_no_wake_and_the_answer_says_so(world: World) -> None:
    world.claude.script("default")
    courier = Courier()
    with trio.fail_after(TURN):
        async with serving(world, courier_factory=lambda acked: courier) as manager:
            tools = SubagentTools(manager)
            result = await tools.call("start", {"name": "q", "prompt": "hi"}, world.caller(wakes=False))
            await turn_done(manager, "q")
            assert manager.records["q"].last
    assert result.structured["wake"] is None
    assert "No wake will come (HIVE_AGENT_SOCKET is not set)" in result.text
    assert courier.sent == []


async def test_status_without_a_name_waits_for_any_turn(world: World) -> None:
    world.claude.script([{"init": {}}, {"wait_for_signal": "SIGUSR1"}, {"result": {}}])
    world.acp.script("default")
    with trio.fail_after(TURN):
        async with serving(world) as manager:
            manager.start("slow", "wait", world.caller())
            manager.start("quick", "hello", world.caller(), backend="acp")
            status = await manager.status(wait=30)
            by_name = {view.name: view for view in status.views}
            assert by_name["quick"].slot is None and by_name["slow"].slot is not None
            manager.interrupt("slow")


async def test_wait_seconds_is_capped_and_checked(world: World) -> None:
    async with serving(world) as manager:
        tools = SubagentTools(manager)
        bad = await tools.call("status", {"wait_seconds": -1}, world.caller())
        words = await tools.call("status", {"wait_seconds": "ten"}, world.caller())
        capped = await tools.call("status", {"wait_seconds": 1e9}, world.caller())
    assert bad.is_error and "wait_seconds" in bad.text
    assert words.is_error
    assert not capped.is_error  # no turn to wait for: answered at once, whatever the wait


# -- layers ---------------------------------------------------------------------------------------


def imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    names |= {
        node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.module and not node.level
    }
    return names


def test_the_relay_does_not_import_the_daemons_machinery() -> None:
    """It is spawned per turn of the parent agent: it needs the kit's relay, not the runtimes."""
    seen: set[str] = set()
    todo = ["relay"]
    while todo:
        module = todo.pop()
        seen.add(module)
        for name in imports(SUBAGENT / f"{module}.py", top_level_only=True):
            if name.startswith("hive.subagent."):
                child = name.rsplit(".", 1)[1]
                if child not in seen:
                    todo.append(child)
            assert not name.startswith(("hive.runtime", "hive.claude", "hive.acp")), (
                f"{module} imports {name}"
            )
    assert seen == {"relay", "_start"}
