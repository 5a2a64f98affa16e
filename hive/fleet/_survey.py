"""What one agent's state directory says of it: the harness's answer to ``status`` where it runs,
else what its files hold (the turn log's last record, the queue, the session), and beside that its
bash daemon's tasks and loose ends and its subagents.

Nothing here takes a lock, writes, or waits on an agent for more than `ASK_SECONDS`: a survey of
a fleet is a read of files that may be half-written, by other processes that go on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from hive._state_dir import lock_holder
from hive._unix import ForeignSocket, connect_owned
from hive.agent import TurnLog, queued_messages, saved_session
from hive.agent_socket import AgentConnection, AgentRequestError, AgentStatus, WakeRefused
from hive.bash import TaskState, TaskStore
from hive.subagent import Store as SubagentStore

if TYPE_CHECKING:
    from hive.bash.client import BashClient

log = logging.getLogger(__name__)

ASK_SECONDS = 1.0
"""How long an agent's socket has to answer ``status`` before it is reported not answering."""
AGENT_SOCKET = "agent.sock"
BASH_SOCKET = "bash.sock"
RUNTIME_ROOT = "/run/hyperhive"
"""Where the NixOS module puts each agent's sockets, ``<root>/<name>/``, beside no state dir
(``HIVE_RUNTIME_ROOT`` says where else, as its ``runtimeDir`` does)."""
TURN_LOG = "turns.jsonl"
LOCK = "agent.lock"
"""``hive-agent``'s lock on its state dir (`hive.agent.harness.LOCK_FILE`)."""
QUEUE = "queue"
SESSION = "session"


@attrs.frozen
class AgentView:
    """One agent as the fleet's table shows it (``None``: not known, or not there)."""

    name: str
    state_dir: str
    harness: str
    """``running`` (its socket answered), ``not answering`` (it did not within `ASK_SECONDS`,
    or a harness holds the state dir's lock and its socket is not where it is looked for),
    ``stopped`` (no harness holds the state dir), or ``not its own socket`` (``refused`` says why)."""
    refused: str | None = None
    """Why its agent socket is not its own, so it was not asked (see `open_own_agent`)."""
    state: str | None = None
    """What the running harness does: ``idle``, ``turn``, ``compacting`` or ``retrying``."""
    since: float | None = None
    """When the running turn (or compaction) started (Unix time)."""
    turn: int | None = None
    """The number of the running turn, else of the last one started."""
    queued: int = 0
    """Messages waiting for a turn."""
    context_used: int | None = None
    """Tokens in its context window after its last turn (or the running one's last report)."""
    context_size: int | None = None
    """Its context window's size in tokens, where the agent says."""
    session_id: str | None = None
    """The agent's session: what its next turn resumes."""
    tasks_running: int = 0
    """Its bash daemon's tasks still running (or waiting in line)."""
    loose_ends: int = 0
    """Ends owed to the agent that it has not been told yet (``mcp-loose-ends/``)."""
    subagents_running: int = 0
    """Its subagents in a turn now."""
    last_outcome: str | None = None
    """How its last turn ended (the turn log's ``outcome``: ``completed``, ``failed``, ``stopped``, ...)."""
    last_ended: float | None = None
    """When that turn ended (Unix time)."""
    last_error: str | None = None
    """What went wrong in that turn, if it did not complete."""
    last_cost_usd: float | None = None
    """What that turn cost, in USD (the turn log's ``cost_usd``)."""
    last_tokens: dict[str, Any] = attrs.field(factory=dict)
    """That turn's token counts as the agent reported them (the turn log's ``tokens``)."""
    session_cost_usd: float | None = None
    """What its session has cost so far, in USD, as the agent last said (its turns' costs add up
    to it)."""
    bash_daemon: str | None = None
    """The bash daemon its harness supervises (``--with-bash-daemon``): ``running`` or ``down``
    (the harness is starting it again); None where the harness started none."""
    subagent_daemon: str | None = None
    """The subagent daemon its harness supervises (``--subagents``), likewise."""

    @property
    def down(self) -> list[str]:
        """The daemons its harness supervises that are down now."""
        found = (("bash daemon", self.bash_daemon), ("subagent daemon", self.subagent_daemon))
        return [what for what, state in found if state == "down"]

    @property
    def harness_says(self) -> str:
        """``harness``, with the daemons it is starting again: ``running (bash daemon down)``."""
        down = self.down
        return f"{self.harness} ({', '.join(down)} down)" if down else self.harness

    @property
    def context_fraction(self) -> float | None:
        """How full its context window is, where it is known."""
        if self.context_used is None or not self.context_size:
            return None
        return self.context_used / self.context_size

    @property
    def session_start(self) -> str:
        """Its session's first 8 characters, as the fleet's tables show it (``-``: none)."""
        return self.session_id[:8] if self.session_id else "-"


def is_state_dir(path: Path) -> bool:
    """Whether ``path`` looks like an agent's state directory (its socket, turn log or queue)."""
    return any((path / name).exists() for name in (AGENT_SOCKET, TURN_LOG, QUEUE))


def state_dirs(roots: list[Path]) -> list[Path]:
    """The agents' state directories under ``roots``: each root that is one itself, else each
    directory directly in it that is one; sorted by name, each once."""
    found: dict[Path, None] = {}
    for root in roots:
        if is_state_dir(root):
            found[root] = None
            continue
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(root), key=lambda e: e.name):
                path = Path(entry.path)
                with contextlib.suppress(OSError):
                    if entry.is_dir() and is_state_dir(path):
                        found[path] = None
    return list(found)


def socket_of(state_dir: Path, name: str) -> Path:
    """Where the agent of ``state_dir`` has its socket ``name``: in the state dir, else where the
    NixOS module puts it (``/run/hyperhive/<agent>/``) if it is there."""
    beside = state_dir / name
    module = Path(os.environ.get("HIVE_RUNTIME_ROOT") or RUNTIME_ROOT) / state_dir.name / name
    if not beside.exists() and module.exists():
        return module
    return beside


NOT_OWN = "not its own socket"
_REMEDY = "remove the socket, and restart the agent's harness"


async def _connect_own(state_dir: Path, name: str) -> tuple[Path, trio.SocketStream]:
    socket = socket_of(state_dir, name)
    owner = os.stat(state_dir).st_uid
    try:
        return socket, await connect_owned(socket, owner, owned_as="its state dir")
    except ForeignSocket as exc:
        raise ForeignSocket(f"{exc}: {_REMEDY}") from None


@asynccontextmanager
async def open_own_agent(state_dir: Path) -> AsyncIterator[tuple[AgentConnection, AgentStatus]]:
    """A connection to the harness of ``state_dir``, with its answer to ``status``, once its
    socket is known to be the agent's own: not a symlink, its state dir's owner's (and its
    harness's uid that, or root), and its harness answering with this state dir. Else
    ForeignSocket, and nothing but ``status`` is sent: an agent's user could otherwise point it
    at another agent's, and the operator's prompt would go there. WakeRefused: the harness
    answered ``status`` without one; OSError: nobody answers there."""
    socket, stream = await _connect_own(state_dir, AGENT_SOCKET)
    async with stream:
        connection = AgentConnection(stream)
        status = await connection.status()
        if status.state_dir is None:
            raise ForeignSocket(f"the harness answering on {socket} does not say its state dir: {_REMEDY}")
        if not _same_dir(status.state_dir, state_dir):
            raise ForeignSocket(
                f"the harness answering on {socket} is the one of {status.state_dir}, not of {state_dir}: {_REMEDY}"
            )
        yield connection, status


@asynccontextmanager
async def open_own_bash(state_dir: Path) -> AsyncIterator[BashClient]:
    """A session with the bash daemon of ``state_dir`` on its own socket (not a symlink, its
    state dir's owner's, its daemon's uid that or root); else ForeignSocket."""
    from hive.bash.client import bash_session

    socket, stream = await _connect_own(state_dir, BASH_SOCKET)
    async with bash_session(stream, str(socket)) as client:
        yield client


def _same_dir(answered: str, state_dir: Path) -> bool:
    try:
        return os.path.samefile(answered, state_dir)
    except OSError:
        return False


async def survey(state_dir: Path, ask_seconds: float = ASK_SECONDS) -> AgentView:
    """What ``state_dir`` says of its agent: its harness's status, within ``ask_seconds``, and its files."""
    status, harness, refused = await _ask_status(state_dir, ask_seconds)
    if harness == "stopped" and lock_holder(state_dir / LOCK) is not None:
        harness = "not answering"
    files = await trio.to_thread.run_sync(_read_files, state_dir)
    name = state_dir.name or str(state_dir)
    view = AgentView(name=name, state_dir=str(state_dir), harness=harness, refused=refused, **files)
    if status is None:
        return view
    return attrs.evolve(
        view,
        state=str(status.state),
        since=status.running_since,
        turn=status.running_turn if status.running_turn is not None else status.turns or view.turn,
        queued=status.queue,
        context_used=status.context_used if status.context_used is not None else view.context_used,
        context_size=status.context_size if status.context_size is not None else view.context_size,
        session_id=status.session_id or view.session_id,
        last_outcome=status.last_stop_reason or view.last_outcome,
        last_ended=status.last_ended or view.last_ended,
        last_error=status.last_error if status.last_turn is not None else view.last_error,
        last_cost_usd=status.last_cost_usd if status.last_turn is not None else view.last_cost_usd,
        last_tokens=status.last_tokens if status.last_turn is not None else view.last_tokens,
        session_cost_usd=status.session_cost_usd,
        bash_daemon=status.bash_daemon.state if status.bash_daemon else None,
        subagent_daemon=status.subagent_daemon.state if status.subagent_daemon else None,
    )


async def survey_all(state_dirs: list[Path], ask_seconds: float = ASK_SECONDS) -> list[AgentView]:
    """`survey` of each, all at once: one agent that does not answer holds up none of the others."""
    views: list[AgentView | None] = [None] * len(state_dirs)

    async def one(index: int, path: Path) -> None:
        views[index] = await survey(path, ask_seconds)

    async with trio.open_nursery() as nursery:
        for index, path in enumerate(state_dirs):
            nursery.start_soon(one, index, path)
    return [v for v in views if v is not None]


async def _ask_status(state_dir: Path, ask_seconds: float) -> tuple[AgentStatus | None, str, str | None]:
    """The harness's status, what `AgentView.harness` says, and why its socket was refused."""
    try:
        with trio.fail_after(ask_seconds):
            async with open_own_agent(state_dir) as (_, status):
                return status, "running", None
    except ForeignSocket as exc:
        return None, NOT_OWN, str(exc)
    except (trio.TooSlowError, WakeRefused):
        return None, "not answering", None
    except (OSError, trio.BrokenResourceError, AgentRequestError):
        return None, "stopped", None


def _read_files(state_dir: Path) -> dict[str, Any]:
    """What the agent's files say (blocking): each file that is missing or torn is left out."""
    found: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        tail = TurnLog.read_tail(state_dir / TURN_LOG)
        found["turn"] = tail.turns or None
        last = tail.last
        if last is not None:
            found.update(
                last_outcome=last.outcome,
                last_ended=last.ended,
                last_error=last.error,
                context_used=last.context_used,
                context_size=last.context_size,
                session_id=last.session_id,
                last_cost_usd=last.cost_usd,
                last_tokens=dict(last.tokens),
            )
    with contextlib.suppress(OSError, ValueError):
        found["queued"] = queued_messages(state_dir / QUEUE)
    session = saved_session(state_dir / SESSION)
    if session is not None:
        found["session_id"] = session.session_id
        found["session_cost_usd"] = session.usd
    found["tasks_running"] = sum(1 for state in _task_states(state_dir) if not state.final)
    store = TaskStore(state_dir)
    with contextlib.suppress(OSError):
        found["loose_ends"] = sum(1 for e in os.scandir(store.loose_ends_dir) if e.name.endswith(".json"))
    with contextlib.suppress(OSError):
        found["subagents_running"] = sum(
            1 for r in SubagentStore(state_dir).load_all() if r.current is not None
        )
    return found


def _task_states(state_dir: Path) -> Iterator[TaskState]:
    """The state of each current task record of the bash daemon (a torn one is skipped)."""
    tasks = TaskStore(state_dir).tasks_dir
    try:
        entries = list(os.scandir(tasks))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith(".json"):
            continue
        try:
            state = json.loads(Path(entry.path).read_bytes()).get("state")
            yield TaskState(state)
        except (OSError, ValueError, AttributeError):
            continue
