"""What a harness that died may have left running, and stopping it before starting again.

Every agent the harness starts gets SIGINT to its process group when the harness dies (from
the sentinel, ``hive.runtime.guarding_agents``), and every daemon SIGINT from the kernel
(its parent-death signal, ``hive._spawn``). One that is still running when the next harness
starts on the same state dir (it ignored that SIGINT, or is still finishing) must not overlap
the new one's: the harness records the pid and start time of each process it starts in a state
file, and at start sends each recorded process that is still running, and is the same process
(its start time tells it from another with a reused pid), SIGINT (an agent: its process group,
as a turn's stop does), and waits for its exit.
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio

from hive._files import read_regular, write_atomic
from hive._proc import Pidfd, start_time
from hive._when import in_seconds
from hive.agent._errors import HarnessError
from hive.errors import StateBusy
from hive.runtime import AgentProcess

log = logging.getLogger("hive.agent")

AGENTS_FILE = "agent-pids.json"
DAEMON_FILE = "bash-daemon-pid.json"
SUBAGENT_DAEMON_FILE = "subagent-daemon-pid.json"
STOP_WITHIN = 30.0
"""How long a previous harness's process is given to exit after SIGINT."""


class PreviousStillRunning(HarnessError, StateBusy):
    """A process a previous harness left running did not exit on SIGINT."""


@attrs.frozen
class Recorded:
    """One process a harness started: its pid, its start time (``/proc/<pid>/stat`` field 22)
    and what it is (for the log)."""

    pid: int
    start_time: int
    name: str

    @classmethod
    def of(cls, pid: int, name: str) -> Recorded | None:
        started = start_time(pid)
        return None if started is None else cls(pid, started, name)


@attrs.frozen
class ProcessRecord:
    """The state file of the processes of one kind a harness has running."""

    path: Path

    def save(self, processes: Iterable[Recorded]) -> None:
        # Not fsynced: it has to survive the harness's death, not the machine's (the processes
        # it names do not survive that either).
        data = [attrs.asdict(p) for p in processes]
        write_atomic(self.path, json.dumps(data).encode(), durable=False)

    def load(self) -> list[Recorded]:
        try:
            data = read_regular(self.path)
        except OSError as exc:
            log.warning("cannot read %s (%s); not looking for processes a previous run left", self.path, exc)
            return []
        if data is None:
            return []
        try:
            return [Recorded(int(p["pid"]), int(p["start_time"]), str(p["name"])) for p in json.loads(data)]
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("%s is not a record of processes (%s); it is ignored", self.path, exc)
            return []


@attrs.define(eq=False)
class AgentRecorder:
    """An ``AgentWatcher`` (``hive.runtime.watching_agents``) that keeps the record of the agents
    running, written as each one is spawned."""

    record: ProcessRecord
    _agents: list[tuple[AgentProcess, Recorded]] = attrs.field(factory=list)

    def __call__(self, agent: AgentProcess) -> None:
        started = agent.start_time()
        recorded = None if started is None else Recorded(agent.pid, started, agent.argv[0])
        self._agents = [(a, r) for a, r in self._agents if a.returncode is None]
        if recorded is not None:
            self._agents.append((agent, recorded))
        try:
            self.record.save(r for _, r in self._agents)
        except OSError as exc:
            log.warning("cannot record agent pid %d in %s: %s", agent.pid, self.record.path, exc)


async def stop_previous(record: ProcessRecord, *, within: float = STOP_WITHIN, groups: bool = False) -> None:
    """SIGINT to every process in ``record`` still running (with ``groups``, to the process group
    each leads, as a turn's stop sends it: an agent's every process), and wait for each to exit;
    raises ``PreviousStillRunning`` for one still running ``within`` seconds later."""
    found = [(r, pidfd) for r in record.load() if (pidfd := Pidfd.adopt(r.pid, r.start_time)) is not None]
    try:
        for recorded, pidfd in found:
            # One that leads no group (none is left, or it was not started leading one) gets it alone.
            sent = (groups and pidfd.signal_group(signal.SIGINT)) or pidfd.send_signal(signal.SIGINT)
            if not sent:
                continue
            log.info(
                "%s (pid %d), left running by a previous hive-agent on this state dir: sent it SIGINT, "
                "waiting for it to exit before starting",
                recorded.name,
                recorded.pid,
            )
        with trio.move_on_after(within):
            for recorded, pidfd in found:
                await pidfd.wait()
                log.info("%s (pid %d) of the previous hive-agent has exited", recorded.name, recorded.pid)
        for recorded, pidfd in found:
            if not pidfd.exited():
                raise PreviousStillRunning(
                    f"{recorded.name} (pid {recorded.pid}), left running by a previous hive-agent on "
                    f"{record.path.parent}, did not exit within {in_seconds(within)} of SIGINT; stop it "
                    f"(kill {recorded.pid}) and start hive-agent again"
                )
    finally:
        for _, pidfd in found:
            pidfd.close()
