"""``hive-agent``: the harness of one agent, one Trio program.

Its nursery stack, outermost first (so it is torn down innermost first):

1. the hyperhive tools' MCP server on ``<state>/hyperhive.sock`` (the agent's ``compact`` tool
   asks the harness to compact);
2. the runtime (an ACP agent is spawned and initialized here, and refused here if it cannot
   serve: the program exits 2 before it serves the agent socket);
3. the harness: its queue file replayed, its turn log open;
4. the agent socket, then (``--with-bash-daemon``) the bash daemon and (``--subagents``) the
   subagent daemon as children, each supervised (``hive.agent._supervise``: one that ends is
   started again after a backoff, and while it is down the status and the agent's calls say
   so), then the turn loop.

SIGINT or SIGTERM stops the turn loop and the agent socket first, so that the running turn takes
the runtime's stop path (SIGINT to the agent) while the runtime is still open; the turn's end is
written to the turn log, the daemons get SIGINT, the sockets are removed, then the runtime and
the tools server close; the exit status is 0. A second signal cuts the wait for the agent's own
end. A signal while it starts cancels the start (an ACP agent starting gets SIGINT), at whatever
moment it comes: from the program's first instruction (`hive.agent._entry`, before these imports)
until Trio's receiver is open, SIGINT and SIGTERM are recorded (`hive._signals`), then acted on.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import attrs
import trio

from hive import _state_dir, sdnotify, telemetry
from hive._main import run_main
from hive._signals import recording_signals
from hive._state_dir import StateDirLock
from hive.agent._hyperhive import serve_hyperhive
from hive.agent._loop import Harness, open_harness
from hive.agent._model import Phase
from hive.agent._options import (
    SUBAGENT_SOCKET,
    Options,
    OptionsError,
    hyperhive_relay_server,
    parse_options,
    relay_server,
    subagent_server,
)
from hive.agent._orphans import (
    AGENTS_FILE,
    DAEMON_FILE,
    SUBAGENT_DAEMON_FILE,
    AgentRecorder,
    ProcessRecord,
    Recorded,
    stop_previous,
)
from hive.agent._session import SessionStore
from hive.agent._supervise import Supervision
from hive.agent_socket import AgentRequest, AgentStatus, Refused, serve_agent_socket
from hive.bash.relay import HYPERHIVE_SOCKET
from hive.runtime import (
    Backend,
    Config,
    McpServer,
    RuntimeSpec,
    guarding_agents,
    open_runtime,
    watching_agents,
)

log = logging.getLogger("hive.agent")

PROMPT_BUDGET = {Backend.CLAUDE: 1 << 20, Backend.ACP: 1 << 20}
"""The most bytes of messages one turn carries. claude reads its prompt on stdin and an ACP
agent gets it in a JSON-RPC message: neither is bound by Linux's limit on an argument (128 KiB),
which claude's prompt, once its last argument, was cut to fit."""
LOCK_FILE = "agent.lock"
SESSION_FILE = "session"
LOOSE_ENDS = "mcp-loose-ends"
BASH_OUTAGE = "bash-daemon-down"
SUBAGENT_OUTAGE = "subagent-daemon-down"
"""The outage files (``hive._outage``) of the daemons it supervises, there while one is down."""


def lock_state_dir(state_dir: Path) -> StateDirLock:
    """The harness's hold on ``state_dir`` (made 0700 if missing), to close at the end."""
    return _state_dir.lock_state_dir(state_dir, LOCK_FILE, holder="hive-agent")


def runtime_config(options: Options, spec: RuntimeSpec) -> Config:
    """The runtime's config: the bash relay and the hyperhive tools' relay first, then the extra
    servers."""
    bash_outage = options.state_dir / BASH_OUTAGE if options.with_bash_daemon else None
    own: tuple[McpServer, ...] = (
        relay_server(options.bash_socket, bash_outage),
        hyperhive_relay_server(options.state_dir / HYPERHIVE_SOCKET),
    )
    if options.subagents:
        own += (
            subagent_server(options.state_dir, options.agent_socket, options.state_dir / SUBAGENT_OUTAGE),
        )
    return attrs.evolve(
        options.turns,
        mcp_servers=(*own, *options.turns.mcp_servers),
        # The seed: all shell execution goes through the bash tools.
        disallowed_tools=("Bash",) if spec.backend is Backend.CLAUDE else (),
        state_dir=options.state_dir,
    )


async def daemon_silence(path: Path) -> str | None:
    """Why no daemon answers on the socket ``path`` (None: one does)."""
    try:
        stream = await trio.open_unix_socket(str(path))
    except OSError as exc:
        return exc.strerror or str(exc)
    await stream.aclose()
    return None


async def warn_without_bash_daemon(options: Options) -> None:
    """Warn if no bash daemon answers on the bash socket: every bash call of the agent fails
    until one does (the relay connects at the next call)."""
    why = await daemon_silence(options.bash_socket)
    if why is not None:
        log.warning(
            "no hive-bash-daemon answers on %s (%s): the agent's bash tools fail until one does; start "
            "one (hive-bash-daemon --state-dir %s --socket %s --agent-socket %s), or run hive-agent "
            "with --with-bash-daemon",
            options.bash_socket,
            why,
            options.state_dir,
            options.bash_socket,
            options.agent_socket,
        )


@attrs.define(eq=False)
class Running:
    """What the signal handler reaches into."""

    harness: Harness | None = None
    ready: bool = False
    stop: trio.Event = attrs.field(factory=trio.Event)
    """Set to stop a harness that is ready."""


def bash_supervision(options: Options, record: ProcessRecord) -> Supervision:
    return Supervision(
        "hive-bash-daemon",
        "bash daemon",
        options.state_dir / BASH_OUTAGE,
        "Call again in a few seconds: the tasks it started keep running, and their ends reach you once "
        "it is back.",
        on_running=recording(record, "hive-bash-daemon"),
    )


def subagent_supervision(options: Options, record: ProcessRecord) -> Supervision:
    return Supervision(
        "subagent daemon",
        "subagent daemon",
        options.state_dir / SUBAGENT_OUTAGE,
        "Call again in a few seconds: the subagents' sessions are kept.",
        on_running=recording(record, "subagent daemon"),
    )


def recording(record: ProcessRecord, name: str) -> Callable[[int], None]:
    """Each pid the daemon ``name`` runs as, kept in ``record`` (for a harness started after
    this one dies)."""

    def save(pid: int) -> None:
        if (recorded := Recorded.of(pid, name)) is not None:
            try:
                record.save([recorded])
            except OSError as exc:
                log.warning("cannot record the %s's pid %d in %s: %s", name, pid, record.path, exc)

    return save


async def serve_agent(
    options: Options, spec: RuntimeSpec, running: Running, on_ready: Callable[[], None] = lambda: None
) -> None:
    """Run the whole agent until ``running.stop`` is set (or it is cancelled while starting)."""
    sessions = SessionStore(options.state_dir / SESSION_FILE, spec.backend.value)
    bash_daemon = ProcessRecord(options.state_dir / DAEMON_FILE)
    subagent_daemon = ProcessRecord(options.state_dir / SUBAGENT_DAEMON_FILE)
    # What a harness that died left running (its agents, its daemons) is stopped first.
    await stop_previous(ProcessRecord(options.state_dir / AGENTS_FILE), groups=True)
    await stop_previous(bash_daemon)
    await stop_previous(subagent_daemon)
    bash = bash_supervision(options, bash_daemon)
    subagents = subagent_supervision(options, subagent_daemon)

    async def agent_asks_to_compact() -> None:
        if running.harness is None:
            raise Refused("the harness is still starting")
        await running.harness.ask_compact("agent")

    async def handle(request: AgentRequest) -> AgentStatus | None:
        assert running.harness is not None
        answer = await running.harness.handle(request)
        if answer is None:
            return None
        return attrs.evolve(answer, bash_daemon=bash.health, subagent_daemon=subagents.health)

    async with trio.open_nursery() as tools:
        await tools.start(
            partial(
                serve_hyperhive,
                options.state_dir / HYPERHIVE_SOCKET,
                loose_ends_dir=options.state_dir / LOOSE_ENDS,
                on_compact=agent_asks_to_compact,
            )
        )
        config = runtime_config(options, spec)
        async with (
            open_runtime(spec, config, session_id=sessions.load()) as runtime,
            open_harness(
                runtime,
                options.state_dir,
                sessions,
                budget=PROMPT_BUDGET[spec.backend],
                name=options.name,
                provider="anthropic" if spec.backend is Backend.CLAUDE else "acp",
            ) as harness,
            trio.open_nursery() as serving,
        ):
            running.harness = harness
            await serving.start(serve_agent_socket, options.agent_socket, handle)
            log.info("serving the agent socket %s (state in %s)", options.agent_socket, options.state_dir)
            if not options.with_bash_daemon:
                serving.start_soon(warn_without_bash_daemon, options)  # beside the start
            elif await daemon_silence(options.bash_socket) is not None:
                from hive.bash import running_daemon

                daemon = [
                    "--state-dir",
                    str(options.state_dir),
                    "--socket",
                    str(options.bash_socket),
                    "--agent-socket",
                    str(options.agent_socket),
                ]
                start = partial(running_daemon, daemon, death_signal=signal.SIGINT)
                pid = await serving.start(bash.run, start)
                log.info("started hive-bash-daemon (pid %d) on %s", pid, options.bash_socket)
            if options.subagents:
                await start_subagent_daemon(options, serving, subagents)
            await serving.start(harness.serve)
            running.ready = True
            on_ready()
            await running.stop.wait()
            # The turn loop, the socket and the daemons first: the running turn takes the
            # runtime's stop path while the runtime is still open (its own tasks are not
            # cancelled); each daemon gets SIGINT.
            serving.cancel_scope.cancel()
        tools.cancel_scope.cancel()


async def start_subagent_daemon(options: Options, serving: trio.Nursery, supervision: Supervision) -> None:
    """Start the subagent daemon as a supervised child, unless one already serves its socket."""
    from hive.bash import running_daemon

    socket = options.state_dir / SUBAGENT_SOCKET
    if await daemon_silence(socket) is None:
        log.warning(
            "a subagent daemon that this hive-agent did not start serves %s: it is used, but not "
            "supervised, and it outlives this hive-agent; stop it (SIGINT to the pid in %s) to have "
            "hive-agent run its own",
            socket,
            options.state_dir / "subagent.lock",
        )
        return
    args = ["--state-dir", str(options.state_dir), "--socket", str(socket)]
    start = partial(
        running_daemon,
        args,
        module="hive.subagent.daemon",
        name="subagent daemon",
        death_signal=signal.SIGINT,
    )
    pid = await serving.start(supervision.run, start)
    log.info("started the subagent daemon (pid %d) on %s", pid, socket)


async def _main(options: Options, spec: RuntimeSpec, early: list[signal.Signals]) -> None:
    running = Running()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as outer:
            serving = trio.CancelScope()

            def stop(name: str) -> None:
                if not running.stop.is_set() and not serving.cancel_called:
                    log.info("%s: stopping%s", name, _what_stops(running))
                    sdnotify.notify("STOPPING=1")
                    if running.ready:
                        running.stop.set()
                    else:
                        serving.cancel()  # while starting: the runtime's stop path
                elif running.harness is not None:
                    log.info("%s again: not waiting for the agent's own end of the turn", name)
                    running.harness.runtime.canceller().cancel()

            async def stop_on_signals() -> None:
                for came in early:  # those that came before the receiver was open
                    stop(came.name)
                async for signum in signals:
                    stop(signal.Signals(signum).name)

            outer.start_soon(stop_on_signals)
            # Each agent the runtime spawns is recorded, for a harness started after this one dies,
            # and its process group gets SIGINT from the sentinel if this one dies meanwhile.
            recorder = AgentRecorder(ProcessRecord(options.state_dir / AGENTS_FILE))
            async with guarding_agents():
                with serving, watching_agents(recorder):
                    await serve_agent(options, spec, running, on_ready=_ready)
            outer.cancel_scope.cancel()


def _what_stops(running: Running) -> str:
    """What a stop ends besides the serving, as the log says it: only what is running."""
    if not running.ready:
        return " before it is ready"
    assert running.harness is not None
    match running.harness.state.phase:
        case Phase.TURN:
            return "; the running turn gets SIGINT"
        case Phase.COMPACTING:
            return "; the running compaction gets SIGINT"
    return ""


def _ready() -> None:
    # What the start made (its imports above all) lives as long as the harness. Frozen, it is walked by none of the collections of its turns, nor by
    # the interpreter's last ones at exit, which took ~230 ms of every stop (bench 18).
    gc.freeze()
    sdnotify.notify("READY=1")


def main(argv: Sequence[str] | None = None, early: list[signal.Signals] | None = None) -> int:
    """``hive-agent``: serve one agent until SIGINT or SIGTERM; the exit status (README, "Exit status").
    ``early``: where the signals that came before this call are recorded (`hive.agent._entry`)."""
    with recording_signals(early) as received:
        return run_main("hive-agent", partial(_run, argv, received))


def _run(argv: Sequence[str] | None, early: list[signal.Signals]) -> int:
    options = parse_options(argv)
    spec = RuntimeSpec.from_env()
    spec.check_executable()  # a missing agent is a bad setting: exit 2 now, not at each turn
    try:
        logging.basicConfig(
            level=options.log_level.upper(),
            stream=sys.stderr,
            format="hive-agent: %(levelname)s: %(message)s",
        )
    except ValueError:
        raise OptionsError(f"--log-level {options.log_level!r}: use debug, info, warning or error") from None
    lock = lock_state_dir(options.state_dir)
    # Said at once: on a loaded machine the start (its imports, the daemons' starts) takes a
    # while, and silence reads as a hang.
    log.info("starting (pid %d, state in %s)", os.getpid(), options.state_dir)
    try:
        with telemetry.exporting("hive-agent"):
            trio.run(_main, options, spec, early)
    finally:
        lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
