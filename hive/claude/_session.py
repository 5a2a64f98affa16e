"""InfiniteSession: one `claude --print` per turn, resuming one session id across turns."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from hive._when import in_seconds
from hive.claude._argv import turn_argv, turn_env, turn_stdin, write_mcp_config
from hive.runtime import (
    SINK_GRACE,
    AgentGroup,
    AgentProcess,
    Config,
    IdleKilled,
    Progress,
    RefusedAsRoot,
    RuntimeSpec,
    SessionNotFound,
    StderrTail,
    StopReason,
    TurnOutcome,
    TurnStopper,
    one_error,
    refused_as_root,
    start_agent,
)
from hive.sink import (
    AssistantMessage,
    Batch,
    ContextUsage,
    LineFramer,
    MessageError,
    ResultMessage,
    Sink,
    StreamMessage,
    SystemInit,
    SystemMessage,
    parse_line,
    structured,
    typed_lines,
)

log = logging.getLogger(__name__)

READ_SIZE = 1 << 20
_WANTED = {
    (init_seen, result_seen): {
        kind: marker
        for kind, marker, wanted in (
            ("result", b'"result"', not result_seen),
            ("system/init", b'"init"', not init_seen),
            ("system/compact_boundary", b'"compact_boundary"', True),
        )
        if wanted
    }
    for init_seen in (False, True)
    for result_seen in (False, True)
}
"""The lines a turn looks for (kind: a JSON string such a line holds), by whether it has
seen its init and its result."""
EXIT_AFTER_EOF = 2.0
"""How long to wait for an exit status once stdout has closed without a result."""
DEFAULT_CONTEXT_WINDOW = 200_000

# As `claude --help` (2.1.318) lists them; --model also takes any full model id.
MODELS = ("default", "sonnet", "opus", "haiku", "fable")
EFFORTS = ("low", "medium", "high", "xhigh", "max")


@attrs.frozen
class ClaudeChoices:
    """What the claude CLI accepts: its model aliases (and any full model id) and effort levels."""

    def models(self) -> tuple[str, ...]:
        """claude's model aliases (``--model`` takes any full model id too)."""
        return MODELS

    def efforts(self) -> tuple[str, ...]:
        """claude's effort levels."""
        return EFFORTS


@attrs.define(eq=False)
class _Turn:
    """One claude process and what it has said so far."""

    agent: AgentProcess
    stdout: trio.abc.ReceiveStream
    session_id: str | None
    resumed: str | None
    started: float = attrs.field(factory=time.monotonic)
    framer: LineFramer = attrs.field(factory=LineFramer)
    stderr: StderrTail = attrs.field(factory=StderrTail)
    result: ResultMessage | None = None
    last_assistant: bytes | None = None
    compacted_to: int | None = None
    eof: bool = False
    init_seen: bool = False


@attrs.define(eq=False)
class InfiniteSession:
    """The claude runtime: each turn is one ``claude --print`` process resuming the session.

    The turn ends at claude's ``result`` line, not at its exit. Every early end (the
    Canceller, no output for ``config.idle_timeout``, a cancelled scope around ``run``)
    takes one stop path: SIGINT to claude's process group, then claude's own end of the
    turn read for at most ``config.stop_grace``; nothing escalates beyond SIGINT. The
    contract is ``hive.runtime.Runtime``'s.
    """

    command: str
    config: Config
    _background: trio.Nursery
    _session_id: str | None = None
    _stopper: TurnStopper = attrs.field(factory=TurnStopper)
    _agents: AgentGroup = attrs.field(factory=AgentGroup)
    context: ContextUsage | None = None
    progress: Progress = attrs.field(factory=Progress)

    @property
    def session_id(self) -> str | None:
        """The session the next turn resumes (None: it starts a new one)."""
        return self._session_id

    def canceller(self) -> TurnStopper:
        """What stops the running turn: SIGINT to its claude."""
        return self._stopper

    def choices(self) -> ClaudeChoices:
        """What the claude CLI accepts."""
        return ClaudeChoices()

    async def archive(self) -> None:
        """Forget the session: the next turn starts a new one, carrying the system prompt."""
        self._session_id = None
        self.context = None

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        """One turn; past the compaction watermark, a checkpoint turn and ``/compact`` follow it."""
        outcome = await self._exclusive(prompt, sink)
        policy = self.config.compaction
        if outcome.stop_reason is StopReason.COMPLETED and policy.due(outcome.usage):
            log.info("context past the watermark: checkpoint, then /compact")
            checkpoint = await self._exclusive(policy.checkpoint_prompt, sink)
            if checkpoint.stop_reason is StopReason.COMPLETED:
                await self.compact(sink)
        return outcome

    async def compact(self, sink: Sink) -> None:
        """Run ``/compact`` as a turn on the session (nothing to do before the first turn)."""
        if self._session_id is None:
            return
        await self._exclusive("/compact", sink)

    async def _exclusive(self, prompt: str, sink: Sink) -> TurnOutcome:
        with self._stopper.turn():
            outcome = await self._turn(prompt, sink)
        if outcome.stop_reason is StopReason.IDLE:
            raise IdleKilled(
                f"claude sent nothing for {in_seconds(self.config.idle_timeout or 0)}; it was sent SIGINT",
                outcome,
            )
        return outcome

    async def close(self) -> None:
        """SIGINT to every claude of this runtime still running (one lingering after its
        result, say), and at most ``config.close_grace`` for them to go."""
        await self._agents.close(self.config.close_grace)

    async def _turn(self, prompt: str, sink: Sink) -> TurnOutcome:
        argv = turn_argv(self.command, self.config, self._session_id, write_mcp_config(self.config))
        with self.progress.waiting("claude to start"):
            agent = await start_agent(
                argv, cwd=self.config.cwd, env=turn_env(self.config), stdin_data=turn_stdin(prompt)
            )
        self._agents.add(agent)
        turn = _Turn(agent, agent.stdout, self._session_id, self._session_id)
        over = trio.Event()
        settle = self.config.stop_grace + SINK_GRACE
        self._background.start_soon(_tend, agent, turn.stderr, over, self.config.linger, settle)
        try:
            return await self._drive(turn, sink)
        finally:
            over.set()

    async def _drive(self, turn: _Turn, sink: Sink) -> TurnOutcome:
        stopper = self._stopper
        try:
            with trio.CancelScope() as running, stopper.running_in(running):
                await self._read(turn, sink, running)
        except trio.Cancelled:
            # A scope around run() was cancelled: the same stop path, then the cancel goes on.
            with trio.move_on_after(self.config.stop_grace + SINK_GRACE, shield=True):
                await self._end_early(turn, StopReason.CANCELLED, sink)
            raise
        except BaseException:
            turn.agent.interrupt()
            raise
        stop_reason = StopReason.COMPLETED
        if turn.result is None and running.cancelled_caught:
            stop_reason = StopReason.CANCELLED if stopper.requested else StopReason.IDLE
            await self._end_early(turn, stop_reason, sink)
        elif turn.result is None:
            stop_reason = StopReason.EXITED
            with trio.move_on_after(EXIT_AFTER_EOF if turn.eof else 0):
                await turn.agent.wait()
                await turn.stderr.drained.wait()
            if not turn.init_seen and refused_as_root(turn.stderr.text()):
                raise RefusedAsRoot
            turn.result = await self._synthesize(turn, stop_reason, sink)
        return await self._conclude(turn, stop_reason, sink)

    async def _end_early(self, turn: _Turn, stop_reason: StopReason, sink: Sink) -> None:
        """The stop path: SIGINT, claude's own end of the turn for the stop grace, and a
        result made by hive if claude gave none."""
        if turn.result is not None:
            return
        await self._stop(turn, sink)
        if turn.result is None:
            turn.result = await self._synthesize(turn, stop_reason, sink)

    async def _read(self, turn: _Turn, sink: Sink, scope: trio.CancelScope | None) -> None:
        """Pass claude's lines on until its result (or the end of its output)."""
        idle = self.config.idle_timeout
        if scope is not None and idle is not None:
            scope.deadline = trio.current_time() + idle
        while turn.result is None:
            chunk = await turn.stdout.receive_some(READ_SIZE)
            if scope is not None and idle is not None:
                scope.deadline = trio.current_time() + idle
            if chunk:
                batch, dropped = turn.framer.feed(chunk)
            else:
                batch, dropped = turn.framer.close()
                turn.eof = True
            for piece in dropped:
                log.warning("claude output dropped (%s): %r", piece.reason, piece.sample)
            if batch is not None:
                self._observe(batch, turn)
                await sink.write(batch)
            if turn.eof:
                return

    def _observe(self, batch: Batch, turn: _Turn) -> None:
        """Note what the turn needs from this batch, touching as few of its lines as it can.

        The result, the init and ``compact_boundary`` lines are found by what their JSON
        says, whatever its spelling (whitespace, key order, escapes; claude 2.1.318 writes its
        result with another key before ``type``): one C-level pass leaves out the lines that
        begin with another type as claude writes them, and of the rest only those that may
        spell one of the wanted kinds are parsed (see ``hive.sink.typed_lines``). The first
        result ends the turn.
        """
        wanted = _WANTED[turn.init_seen, turn.result is not None]
        for _, _, obj in typed_lines(batch, wanted):
            message = structured(obj)
            if message is not None:
                self._noted(message, turn)
        # In compact JSON this can only be a message's own type (a quote inside a string is
        # escaped): the last one is kept whole, and read at the turn's end.
        at = batch.data.rfind(b'"type":"assistant"')
        if at >= 0:
            turn.last_assistant = batch.line_at(at)

    @staticmethod
    def _noted(message: StreamMessage, turn: _Turn) -> None:
        if isinstance(message, SystemInit):
            turn.init_seen = True
            if turn.session_id is None:
                turn.session_id = message.session_id
        elif isinstance(message, SystemMessage) and message.subtype == "compact_boundary":
            post = message.extra.get("compact_metadata", {}).get("post_tokens")
            if isinstance(post, int):
                turn.compacted_to = post
        elif isinstance(message, ResultMessage) and turn.result is None:
            turn.result = message
            if turn.session_id is None:
                turn.session_id = message.session_id

    async def _stop(self, turn: _Turn, sink: Sink) -> None:
        """The exit path of a stopped turn: SIGINT to claude's group, then its lines until its
        result, for at most the stop grace. Shielded: a stop must finish what it started."""
        turn.agent.interrupt()
        if turn.eof:
            return
        with (
            trio.CancelScope(shield=True, deadline=trio.current_time() + self.config.stop_grace) as grace,
            self._stopper.waiting_in(grace),
        ):
            await self._read(turn, sink, None)
        if grace.cancelled_caught:
            log.warning(
                "claude (pid %d) did not end its turn within %s of SIGINT",
                turn.agent.pid,
                in_seconds(self.config.stop_grace),
            )

    async def _synthesize(self, turn: _Turn, stop_reason: StopReason, sink: Sink) -> ResultMessage:
        """A result in claude's shape for a turn claude ended without one; marked as hive's."""
        status = turn.agent.returncode
        what = {
            StopReason.CANCELLED: "the turn was cancelled",
            StopReason.IDLE: f"claude sent nothing for {in_seconds(self.config.idle_timeout or 0)}",
            StopReason.EXITED: "claude ended its output",
        }.get(stop_reason, "the turn ended")
        how = f"it exited with status {status}" if status is not None else "it has not exited"
        tail = turn.stderr.text().strip()
        error = f"{what} without a result; {how}" + (f"; stderr: {tail[-2000:]}" if tail else "")
        result = ResultMessage(
            subtype="error_during_execution",
            is_error=True,
            session_id=turn.session_id,
            duration_ms=int((time.monotonic() - turn.started) * 1000),
            usage={
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
            errors=[error],
            uuid=str(uuid.uuid4()),
            extra={"hive": {"synthesized": True, "stop_reason": stop_reason.value, "exit_status": status}},
        )
        await sink.write(Batch.of([result]))
        return result

    async def _conclude(self, turn: _Turn, stop_reason: StopReason, sink: Sink) -> TurnOutcome:
        result = turn.result
        assert result is not None
        if turn.resumed is not None and not turn.init_seen and result.is_error and "hive" not in result.extra:
            # claude refuses a session it does not know with a lone error result (no init).
            raise SessionNotFound(turn.resumed, "; ".join(result.errors or []) or turn.stderr.text().strip())
        if turn.session_id is not None:
            self._session_id = turn.session_id
        size = result.context_window or (self.context.size if self.context else DEFAULT_CONTEXT_WINDOW)
        used = turn.compacted_to if turn.compacted_to is not None else _context_tokens(turn.last_assistant)
        if used is not None:
            self.context = ContextUsage(used=used, size=size)
            await sink.context_usage(self.context)
        return TurnOutcome.of_result(
            result,
            stop_reason=stop_reason,
            session_id=self._session_id,
            usage=self.context,
            interrupted=turn.agent.signalled,
        )


def _context_tokens(line: bytes | None) -> int | None:
    """The context the last model response used: its whole input plus its output."""
    if line is None:
        return None
    try:
        message = parse_line(line)
    except MessageError:
        return None
    if isinstance(message, AssistantMessage) and message.message.usage is not None:
        return message.message.usage.context_tokens
    return None


async def _tend(
    agent: AgentProcess, stderr: StderrTail, over: trio.Event, linger: float, settle: float
) -> None:
    """For the life of one claude: drain its stderr into the turn's tail; once its turn is
    over, read and drop the rest of its output, SIGINT it if it lingers past ``linger``, and
    reap it. Its pipes are closed once it has gone, or when the runtime closes, but never
    under a turn still reading its end (for at most ``settle``, the turn's own stop bound)."""
    process = agent
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stderr.drain, process.stderr)
            nursery.start_soon(agent.feed_stdin)
            await over.wait()
            nursery.start_soon(_discard, process.stdout)
            with trio.move_on_after(linger):
                await agent.wait()
            if agent.interrupt():
                log.warning(
                    "claude (pid %d) lingered %s after its turn; sent SIGINT", agent.pid, in_seconds(linger)
                )
            await agent.wait()
            nursery.cancel_scope.cancel()
    finally:
        # One still running now ignored SIGINT; it is left to run (runtime.RUNNING keeps it).
        with trio.move_on_after(settle, shield=True):
            await over.wait()
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            await process.stdout.aclose()
            await process.stderr.aclose()


async def _discard(stream: trio.abc.ReceiveStream) -> None:
    try:
        while await stream.receive_some(READ_SIZE):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


@asynccontextmanager
async def open_claude_runtime(
    spec: RuntimeSpec, config: Config, session_id: str | None = None, *, progress: Progress | None = None
) -> AsyncIterator[InfiniteSession]:
    """The claude runtime. Leaving the block sends SIGINT to every claude of it still running
    and waits at most ``config.close_grace`` for them; one that ignores SIGINT is left running.
    Raises AgentUnavailable at once if ``spec.claude_command`` is no executable."""
    spec.check_executable(turn_env(config))
    with one_error():
        async with trio.open_nursery() as background:
            session = InfiniteSession(spec.claude_command, config, background, session_id)
            session.progress = progress or Progress()
            try:
                yield session
            finally:
                with trio.move_on_after(config.close_grace, shield=True):
                    await session.close()
                background.cancel_scope.cancel()
