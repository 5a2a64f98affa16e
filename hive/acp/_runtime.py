"""AcpRuntime: any Agent Client Protocol agent as a hive runtime.

This module drives turns and owns their stop path; the parts it ties together each own one
job: the agent process and its connection (``_link``), the session and its choices
(``_session``), the result a turn's end gets (``_outcome``, a pure function), compaction
(``_compaction``) and permission answers (``_permission``).

A turn is one ``session/prompt``. Every early end (the Canceller, the idle watchdog, a
cancelled scope around ``run``) is ``session/cancel``; an agent that has not answered
``config.cancel_grace`` later is sent SIGINT, its end is read for ``config.stop_grace``, and
the next turn respawns it. A stop while the turn is still being set up (the agent spawning,
``initialize``, ``session/new`` or ``session/load``) sends the agent SIGINT at once. Nothing
escalates beyond SIGINT. The contract is ``hive.runtime.Runtime``'s.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from hive._when import in_seconds
from hive.acp._compaction import compact
from hive.acp._errors import AcpError, AgentExited
from hive.acp._jsonrpc import Pending, Unhandled
from hive.acp._link import AgentLink, open_link
from hive.acp._outcome import Ending, ending
from hive.acp._permission import answer_permission
from hive.acp._schema import (
    AgentCapabilities,
    CancelNotification,
    ConfigOption,
    PromptRequest,
    RequestPermissionRequest,
    SchemaError,
    SessionNotification,
    TextContent,
    from_wire,
    to_wire,
)
from hive.acp._session import AcpChoices, SessionState
from hive.acp._translate import Translator
from hive.runtime import (
    SINK_GRACE,
    AgentGroup,
    Config,
    IdleKilled,
    IdleTimeout,
    Progress,
    RuntimeSpec,
    StopReason,
    TurnOutcome,
    TurnStopper,
    one_error,
)
from hive.sink import ContextUsage, Sink

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class _Turn:
    """How far one turn got, for its end to be told from."""

    link: AgentLink | None = None
    translator: Translator | None = None
    pending: Pending | None = None
    """The prompt, once it is wholly written to the agent."""
    answer: Any = None
    failure: AcpError | None = None
    tool_running: bool = False
    tool_changes_at_cancel: int | None = None
    stopped_while: str | None = None
    concluded: bool = False


@attrs.define(eq=False)
class AcpRuntime:
    """The ACP runtime: one agent process serving the session's turns, one ``session/prompt``
    each (see the module's docstring for its stop path)."""

    spec: RuntimeSpec
    config: Config
    _background: trio.Nursery
    _state: SessionState
    progress: Progress = attrs.field(factory=Progress)
    _link: AgentLink | None = None
    _stopper: TurnStopper = attrs.field(factory=TurnStopper)
    _agents: AgentGroup = attrs.field(factory=AgentGroup)
    _translator: Translator | None = None
    _idle: float | None = None
    _cancelling: bool = False

    @property
    def session_id(self) -> str | None:
        """The ACP session the turns run in (None until one is created or loaded)."""
        return self._state.session_id

    @property
    def agent_pid(self) -> int | None:
        """The running agent's pid (None while none runs)."""
        return self._link.process.pid if self._link else None

    @property
    def agent_capabilities(self) -> AgentCapabilities:
        """What the running agent said it can do at initialize."""
        return self._link.capabilities if self._link else AgentCapabilities()

    @property
    def config_options(self) -> list[ConfigOption]:
        """The session's configuration options, as the agent last told them."""
        return self._state.config_options

    @property
    def commands(self) -> list[str]:
        """The slash commands the agent offers in the session."""
        return self._state.commands

    @property
    def context(self) -> ContextUsage | None:
        """How full the session's context window is, as the agent last said (None: not yet)."""
        return self._state.context

    def option(self, category: str) -> ConfigOption | None:
        """The session's configuration option of ``category`` (``model``, ``thought_level``...)."""
        return self._state.option(category)

    def canceller(self) -> TurnStopper:
        """What stops the running turn: ``session/cancel``, then SIGINT if it goes unanswered."""
        return self._stopper

    def choices(self) -> AcpChoices:
        """The models and effort levels the session offers now."""
        return AcpChoices(self._state)

    # -- the agent ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the agent and initialize it; AgentRefused if it cannot serve as hive's runtime."""
        self._link = await open_link(
            self.spec,
            self.config,
            self._background,
            self._agents,
            self.progress,
            on_request=self._on_request,
            on_notification=self._on_notification,
        )

    async def _ensure_link(self) -> AgentLink:
        if self._link is not None and not self._link.usable:
            log.warning("the ACP agent has gone; starting a new one")
            self._forget(self._link)
        if self._link is None:
            await self.start()
        assert self._link is not None
        return self._link

    def _forget(self, link: AgentLink) -> None:
        """No more turns on ``link``: the next turn starts a new agent and attaches the session again."""
        link.scope.cancel()
        if self._link is link:
            self._link = None
            self._state.detach()

    async def close(self) -> None:
        """SIGINT to every agent process of this runtime still running, at most
        ``config.close_grace`` for them to go, and no more reading from them."""
        await self._agents.close(self.config.close_grace)
        if self._link is not None:
            self._forget(self._link)

    # -- what the agent sends -------------------------------------------------------------------

    async def _on_request(self, method: str, params: Any) -> Any:
        if method != "session/request_permission":
            raise Unhandled(method)
        request: RequestPermissionRequest = from_wire(params, RequestPermissionRequest)
        translator = self._translator
        if translator is not None and request.session_id == translator.session_id:
            # Written before the answer lets the call run, so its tool_use precedes its result.
            await translator.asked(request.tool_call)
        return to_wire(answer_permission(request, self.config, cancelling=self._cancelling))

    async def _on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            return
        try:
            notification: SessionNotification = from_wire(params, SessionNotification)
        except SchemaError as exc:
            log.warning("skipping a session/update hive cannot read: %s", exc)
            return
        self._state.observe(notification.update)
        translator = self._translator
        if translator is not None and notification.session_id == translator.session_id:
            running = self._stopper.running
            if running is not None and self._idle is not None:
                running.deadline = trio.current_time() + self._idle
            await translator.update(notification.update)

    # -- turns ----------------------------------------------------------------------------------

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        """One turn; past the compaction watermark, the session is compacted after it."""
        outcome = await self._exclusive(prompt, sink)
        if outcome.stop_reason is StopReason.COMPLETED and self.config.compaction.due(outcome.usage):
            log.info("context past the watermark: compacting")
            await self._compact(sink, proactive=True)
        return outcome

    async def _exclusive(self, prompt: str, sink: Sink, idle: float | None = None) -> TurnOutcome:
        idle = idle if idle is not None else self.config.idle_timeout
        with self._stopper.turn():
            outcome = await self._turn(prompt, sink, idle)
        if outcome.stop_reason is StopReason.IDLE:
            what = IdleKilled if outcome.interrupted else IdleTimeout
            raise what(
                f"the ACP agent sent nothing for {in_seconds(idle or 0)}; the turn was cancelled"
                + (" and the agent was sent SIGINT" if outcome.interrupted else ""),
                outcome,
            )
        return outcome

    async def _turn(self, prompt: str, sink: Sink, idle: float | None) -> TurnOutcome:
        turn = _Turn()
        stopper = self._stopper
        self._idle = idle
        self.progress.waiting_for = None
        try:
            with trio.CancelScope() as running, stopper.running_in(running):
                if idle is not None:
                    running.deadline = trio.current_time() + idle
                await self._drive(turn, prompt, sink)
            stop_reason = StopReason.COMPLETED
            if running.cancelled_caught and (turn.pending is None or not turn.pending.done):
                stop_reason = StopReason.CANCELLED if stopper.requested else StopReason.IDLE
                await self._end_early(turn, stop_reason)
            elif isinstance(turn.failure, AgentExited):
                stop_reason = StopReason.EXITED
            return await self._conclude(turn, stop_reason, sink)
        except trio.Cancelled:
            # A scope around run() was cancelled: the same stop path, then the cancel goes on.
            bound = self.config.cancel_grace + self.config.stop_grace + SINK_GRACE
            with trio.move_on_after(bound, shield=True):
                await self._end_early(turn, StopReason.CANCELLED)
                if not turn.concluded:
                    await self._conclude(turn, StopReason.CANCELLED, sink)
            raise
        finally:
            self._translator, self._idle, self._cancelling = None, None, False

    async def _drive(self, turn: _Turn, prompt: str, sink: Sink) -> None:
        """Set the turn up (agent, session, choices), send the prompt and wait for its answer.

        Before each request a stop is taken while the agent is between requests, where it
        needs no signal; a stop during a request (the agent mid-setup, a prompt half written)
        leaves ``progress`` naming it, and the stop path sends SIGINT.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        turn.link = link = await self._ensure_link()
        session = await self._state.attach(link, self.progress)
        await trio.lowlevel.checkpoint_if_cancelled()
        with self.progress.waiting("the ACP agent to set the model and effort"):
            await self._state.apply_choices(link, session)
        model = self._state.option("model")
        turn.translator = translator = Translator(
            session, sink, model=str(model.current_value) if model else ""
        )
        if self._state.announce:
            self._state.announce = False
            info = attrs.asdict(link.info) if link.info else {}
            names = [server.name for server in self.config.mcp_servers]
            await translator.init(str(self.config.cwd), mcp_servers=names, commands=self.commands, agent=info)
        self._translator = translator
        await trio.lowlevel.checkpoint_if_cancelled()
        with self.progress.waiting("the ACP agent to read the prompt"):
            turn.pending = await link.connection.start_request(
                "session/prompt", to_wire(PromptRequest(session, [TextContent(prompt)]))
            )
        with self.progress.waiting("the ACP agent's answer to the prompt"):
            try:
                turn.answer = await turn.pending.wait()
            except AcpError as exc:
                turn.failure = exc

    async def _end_early(self, turn: _Turn, stop_reason: StopReason) -> None:
        """The stop path. Before the prompt is out, the agent is mid-setup: SIGINT at once (the
        next turn starts a new one). After it, ``session/cancel`` and the answer for the cancel
        grace, then SIGINT and the agent's end for the stop grace. Each wait has its deadline."""
        if turn.pending is None:
            waiting_for = self.progress.waiting_for
            turn.stopped_while = waiting_for or "the prompt to be sent"
            if waiting_for is not None and self._link is not None:
                # The agent is mid-request (a hung session/new, a prompt half written): SIGINT.
                turn.link = self._link
                await self._link.drop(self.config.stop_grace)
                self._forget(self._link)
            return
        if turn.pending.done:
            return
        link, translator = turn.link, turn.translator
        assert link is not None and translator is not None
        turn.tool_running = translator.tool_running
        turn.tool_changes_at_cancel = translator.tool_changes
        self._cancelling = True
        with trio.CancelScope(shield=True):
            with trio.move_on_after(self.config.cancel_grace) as grace, self._stopper.waiting_in(grace):
                await self._wait_answer(turn, cancel=translator.session_id)
            if turn.pending.done:
                return
            log.warning(
                "the ACP agent did not answer its cancelled prompt within %s; sending SIGINT",
                in_seconds(self.config.cancel_grace),
            )
            link.process.interrupt()
            with trio.move_on_after(self.config.stop_grace) as grace, self._stopper.waiting_in(grace):
                await self._wait_answer(turn)
            self._forget(link)

    async def _wait_answer(self, turn: _Turn, cancel: str | None = None) -> None:
        assert turn.link is not None and turn.pending is not None
        try:
            if cancel is not None:
                await turn.link.connection.notify("session/cancel", to_wire(CancelNotification(cancel)))
            turn.answer = await turn.pending.wait()
        except AcpError as exc:
            turn.failure = exc

    async def _conclude(self, turn: _Turn, stop_reason: StopReason, sink: Sink) -> TurnOutcome:
        turn.concluded = True
        killed = turn.link is not None and turn.link.process.signalled
        end: Ending = ending(
            stop_reason,
            turn.answer,
            turn.failure,
            killed=killed,
            tool_running=turn.tool_running
            or (
                turn.translator is not None
                and turn.tool_changes_at_cancel is not None
                and turn.translator.tool_changes > turn.tool_changes_at_cancel
            ),
            before_prompt=turn.stopped_while,
        )
        translator = turn.translator or Translator(self._state.session_id or "", sink)
        result = await translator.finish(end)
        if translator.usage is not None:
            self._state.context = translator.usage
        return TurnOutcome.of_result(
            result,
            stop_reason=stop_reason,
            session_id=self._state.session_id,
            usage=translator.usage or self._state.context,
            interrupted=killed,
        )

    # -- sessions and compaction ----------------------------------------------------------------

    async def archive(self) -> None:
        """Forget the session: the next turn starts a new one (the system prompt goes with it)."""
        self._state.archive()
        if self._link is not None:
            self._link.session = None

    async def compact(self, sink: Sink) -> None:
        """The operator's /compact (or the agent's compact tool)."""
        await self._compact(sink, proactive=False)

    async def _compact(self, sink: Sink, *, proactive: bool) -> None:
        if self._state.session_id is None:
            return
        await compact(self._exclusive, self.archive, self.config, self.commands, sink, proactive=proactive)


@asynccontextmanager
async def open_acp_runtime(
    spec: RuntimeSpec, config: Config, session_id: str | None = None, *, progress: Progress | None = None
) -> AsyncIterator[AcpRuntime]:
    """The ACP runtime: the agent is started and initialized before the block (an agent that
    cannot serve is refused here); leaving the block sends its process group SIGINT and waits
    at most ``config.close_grace`` for it."""
    with one_error():
        async with trio.open_nursery() as background:
            state = SessionState(config, session_id)
            runtime = AcpRuntime(spec, config, background, state, progress or Progress())
            try:
                await runtime.start()
                yield runtime
            finally:
                with trio.move_on_after(config.close_grace, shield=True):
                    await runtime.close()
                background.cancel_scope.cancel()
