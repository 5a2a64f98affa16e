"""What finds a task's processes wherever they went: its tag, its process group, the cgroup
namespace it runs in (held from its wrapper), and the orphans its wrapper adopted as subreaper."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import trio

from hive.bash._settings import TaskSettings
from hive.bash._task import Task
from hive.bash.procs import _cgroups, _namespaces, _procs


@attrs.define(eq=False)
class TaskFinder:
    """The marks of each task's processes, and the cgroup namespaces held to know them by."""

    settings: TaskSettings
    _own_namespace: int | None = attrs.field(factory=lambda: _namespaces.cgroup_namespace("self"))
    """The daemon's cgroup namespace: a wrapper still in it has not entered its own yet."""
    _namespaces: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    """Serial -> the inode of the task's cgroup namespace and a descriptor holding it."""
    _known: dict[str, frozenset[tuple[int, int]]] = attrs.field(factory=dict)
    """Serial -> the processes (pid, start time) of a task with no namespace, found as its stop
    began (see `catch_adopted`)."""

    def marks(self, task: Task, *, by_group: bool = True) -> _procs.TaskMarks:
        pgid = task.record.pid if by_group else None
        serial = task.record.serial
        held = self._namespaces.get(serial)
        known = self._known.get(serial, frozenset())
        return _procs.TaskMarks(
            _procs.task_tag(task.id, serial), pgid, None if held is None else held[0], known
        )

    def namespace_inodes(self) -> set[int]:
        """The cgroup namespaces of the tasks, by inode."""
        return {inode for inode, _fd in self._namespaces.values()}

    async def unmarked_orphans(self, task: Task, cgroups: set[Path]) -> list[int]:
        """The pids of the processes the daemon (the subreaper) adopted since ``task`` started
        that carry no mark of any task (no tag, no task's cgroup namespace, not in one of the
        tasks' ``cgroups``); none where it reaps no orphans."""
        if not self.settings.reap_orphans:
            return []
        since = task.record.pid_start_time
        namespaces = self.namespace_inodes()

        def unmarked() -> list[int]:
            return [
                p.pid
                for p in _procs.unmarked_orphans(since)
                if p.cgroup_ns not in namespaces and not _within(_cgroups.cgroup_dir(p.pid), cgroups)
            ]

        return await trio.to_thread.run_sync(unmarked)

    async def catch_adopted(self, task: Task) -> None:
        """Where the task has no cgroup namespace, its wrapper is the subreaper of its orphans (a
        cleared environment in a double fork among them), which are known as its descendants
        only while it runs: they are found before the SIGINT ends it, and stopped with the task."""
        if task.record.serial in self._namespaces or task.exited.is_set() or not self.settings.reap_orphans:
            return
        found = await trio.to_thread.run_sync(_procs.task_processes, self.marks(task))
        self._known[task.record.serial] = frozenset((p.pid, p.start_time) for p in found)

    def unlearned(self, task: Task) -> int | None:
        """The pid of the task's wrapper, if its cgroup namespace is to be learned from it."""
        pid = task.record.pid
        if self.settings.unshare is None or task.record.serial in self._namespaces or task.exited.is_set():
            return None
        return pid

    async def learn(self, task: Task) -> None:
        """Hold the task's cgroup namespace, from its wrapper, if it is not held yet and the
        wrapper still runs (its pid is its own until it is reaped)."""
        pid = self.unlearned(task)
        if pid is not None:
            self.learned(task, await trio.to_thread.run_sync(_namespaces.hold_cgroup_namespace, pid))

    def learned(self, task: Task, held: tuple[int, int] | None) -> None:
        """A namespace opened from the task's wrapper: the task's, once the wrapper has left the
        daemon's (it enters its own before the command runs); else it is closed."""
        if held is None:
            return
        serial = task.record.serial
        if held[0] != self._own_namespace and serial not in self._namespaces and not task.exited.is_set():
            self._namespaces[serial] = held
        else:
            os.close(held[1])

    def forget(self, task: Task) -> None:
        """No process of the task is left: its namespace is let go."""
        self._known.pop(task.record.serial, None)
        held = self._namespaces.pop(task.record.serial, None)
        if held is not None:
            os.close(held[1])


def _within(cgroup: Path | None, cgroups: set[Path]) -> bool:
    """Whether ``cgroup`` is one of ``cgroups`` or below one of them."""
    return cgroup is not None and (cgroup in cgroups or not cgroups.isdisjoint(cgroup.parents))
