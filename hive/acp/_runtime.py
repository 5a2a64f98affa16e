"""AcpRuntime: any Agent Client Protocol agent as a hive runtime.

The agent is spawned from the RuntimeSpec, leading its own process group, and must accept
MCP servers over HTTP. A turn is one ``session/prompt``; stopping it is ``session/cancel``
(by the Canceller, or by the idle watchdog once no ``session/update`` has come for
``config.idle_timeout``); an agent that has not answered 10 s later is sent SIGINT and the
next turn respawns it. Nothing escalates beyond SIGINT.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from hive import __version__
from hive.acp._errors import AcpError, AgentExited, JsonRpcError
from hive.acp._jsonrpc import Connection, Unhandled
from hive.acp._schema import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AvailableCommandsUpdate,
    CancelledOutcome,
    CancelNotification,
    ClientCapabilities,
    ConfigOption,
    ConfigOptionUpdate,
    EnvVariable,
    HttpHeader,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    LoadSessionResponse,
    McpServer,
    McpServerHttp,
    McpServerStdio,
    NewSessionRequest,
    NewSessionResponse,
    PromptRequest,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SchemaError,
    SelectedOutcome,
    SessionNotification,
    SetConfigOptionRequest,
    SetConfigOptionResponse,
    TextContent,
    UsageUpdate,
    from_wire,
    to_wire,
)
from hive.acp._translate import Translator
from hive.runtime import (
    AgentProcess,
    AgentRefused,
    Config,
    HttpServer,
    IdleKilled,
    IdleTimeout,
    RuntimeSpec,
    StderrTail,
    StdioServer,
    StopReason,
    TurnFailed,
    TurnOutcome,
    TurnStopper,
    one_error,
    start_agent,
)
from hive.sink import ContextUsage, Sink

log = logging.getLogger(__name__)

CANCEL_GRACE = 10.0
"""After session/cancel, how long the agent has to answer the prompt before it gets SIGINT."""
COMPACT_IDLE = 180.0
"""A compact command that sends nothing for this long (or the turn's idle window) has failed."""
EXIT_WAIT = 1.0
"""When the agent's output ends, how long to wait for its exit status."""
CANCELLED_ERRORS = frozenset({-32603, -32800})
"""Answers to a cancelled prompt that mean "cancelled" (CLIENTS.md: agents send these)."""


@attrs.define(eq=False)
class _Agent:
    """One agent process, its connection and what it said at initialize."""

    process: AgentProcess
    connection: Connection
    stderr: StderrTail
    scope: trio.CancelScope
    capabilities: AgentCapabilities = attrs.field(factory=AgentCapabilities)
    info: Implementation | None = None
    session: str | None = None
    """The session attached on this process (a new process attaches it again)."""


@attrs.define(eq=False)
class AcpChoices:
    """The models and effort levels the attached session offers now (empty before one is)."""

    runtime: AcpRuntime

    def models(self) -> tuple[str, ...]:
        option = self.runtime.option("model")
        return tuple(option.values()) if option else ()

    def efforts(self) -> tuple[str, ...]:
        option = self.runtime.option("thought_level")
        return tuple(option.values()) if option else ()


@attrs.define(eq=False)
class AcpRuntime:
    spec: RuntimeSpec
    config: Config
    _background: trio.Nursery
    _session_id: str | None = None
    _agent: _Agent | None = None
    _stopper: TurnStopper = attrs.field(factory=TurnStopper)
    _busy: bool = False
    _cancelling: bool = False
    _translator: Translator | None = None
    _announce: bool = False
    config_options: list[ConfigOption] = attrs.field(factory=list)
    commands: list[str] = attrs.field(factory=list)
    context: ContextUsage | None = None

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def agent_pid(self) -> int | None:
        return self._agent.process.pid if self._agent else None

    @property
    def agent_capabilities(self) -> AgentCapabilities:
        """What the running agent said it can do at initialize."""
        return self._agent.capabilities if self._agent else AgentCapabilities()

    def canceller(self) -> TurnStopper:
        return self._stopper

    def choices(self) -> AcpChoices:
        return AcpChoices(self)

    def option(self, category: str) -> ConfigOption | None:
        """The first config option of ``category`` the attached session offers."""
        if self._agent is None or self._agent.session is None:
            return None
        return next((o for o in self.config_options if o.category == category), None)

    # -- the agent ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the agent and initialize it; refuse one that cannot serve as hive's runtime."""
        assert self.spec.command is not None
        env = {**os.environ, **dict(self.spec.env), **dict(self.config.env)}
        argv = [self.spec.command, *self.spec.args]
        process = await start_agent(argv, cwd=self.config.cwd, env=env, stdin=subprocess.PIPE)
        assert process.process.stdin is not None and process.process.stdout is not None
        stderr = StderrTail()
        agent = _Agent(process, None, stderr, trio.CancelScope())  # type: ignore[arg-type]

        async def ended() -> BaseException:
            with trio.move_on_after(EXIT_WAIT):
                await process.wait()
            return AgentExited(process.returncode, stderr.text())

        agent.connection = Connection(
            process.process.stdin,
            process.process.stdout,
            self._on_request,
            self._on_notification,
            ended,
        )
        await self._background.start(self._serve, agent)
        self._agent = agent
        refusal = await self._initialize(agent, argv[0])
        if refusal is not None:
            await self._drop_agent()
            raise AgentRefused(refusal)

    async def _initialize(self, agent: _Agent, command: str) -> str | None:
        """Initialize the agent; why it cannot serve as hive's runtime, or None if it can."""
        try:
            answer = await agent.connection.request(
                "initialize",
                to_wire(
                    InitializeRequest(
                        PROTOCOL_VERSION, ClientCapabilities(), Implementation("hive", __version__)
                    )
                ),
            )
            initialized: InitializeResponse = from_wire(answer, InitializeResponse)
        except (AcpError, SchemaError) as exc:
            return f"the ACP agent {command!r} failed to initialize: {exc}"
        agent.capabilities, agent.info = initialized.agent_capabilities, initialized.agent_info
        name = initialized.agent_info.name if initialized.agent_info else command
        if initialized.protocol_version != PROTOCOL_VERSION:
            return f"the ACP agent {name!r} speaks protocol version {initialized.protocol_version}; hive speaks {PROTOCOL_VERSION}"
        if not initialized.agent_capabilities.mcp_capabilities.http:
            return (
                f"the ACP agent {name!r} does not take MCP servers over HTTP (its initialize answer lacks "
                "mcpCapabilities.http), and hive's tools are served over HTTP: it cannot be hive's runtime"
            )
        return None

    async def _serve(
        self, agent: _Agent, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        assert agent.process.process.stderr is not None
        with agent.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.stderr.drain, agent.process.process.stderr)
                await nursery.start(agent.connection.serve)
                task_status.started()
                await trio.sleep_forever()

    async def _drop_agent(self) -> None:
        """SIGINT to the agent's group, a moment for it to go, and no more reading from it."""
        agent, self._agent = self._agent, None
        if agent is None:
            return
        agent.process.interrupt()
        with trio.move_on_after(self.config.stop_grace, shield=True):
            await agent.process.wait()
        agent.scope.cancel()

    async def _ensure_agent(self) -> _Agent:
        if self._agent is None or self._agent.connection.closed:
            if self._agent is not None:
                log.warning("the ACP agent has gone; starting a new one")
                self._agent.scope.cancel()
                self._agent = None
            await self.start()
        assert self._agent is not None
        return self._agent

    # -- the session ----------------------------------------------------------------------------

    def _mcp_servers(self) -> list[McpServer]:
        servers: list[McpServer] = []
        for server in self.config.mcp_servers:
            if isinstance(server, StdioServer):
                env = [EnvVariable(k, v) for k, v in server.env]
                servers.append(McpServerStdio(server.name, server.command, list(server.args), env))
            elif isinstance(server, HttpServer):
                headers = [HttpHeader(k, v) for k, v in server.headers]
                servers.append(McpServerHttp(server.name, server.url, headers))
        return servers

    async def _ensure_session(self, agent: _Agent) -> str:
        if agent.session is not None:
            return agent.session
        cwd = str(self.config.cwd)
        servers = self._mcp_servers()
        if self._session_id is not None and agent.capabilities.load_session:
            try:
                answer = await agent.connection.request(
                    "session/load", to_wire(LoadSessionRequest(self._session_id, cwd, servers))
                )
            except JsonRpcError as exc:
                log.warning(
                    "the ACP agent could not load session %s (%s); starting a new one", self._session_id, exc
                )
            else:
                loaded: LoadSessionResponse = from_wire(answer, LoadSessionResponse)
                self.config_options = loaded.config_options or self.config_options
                agent.session = self._session_id
                self._announce = True
                return agent.session
        elif self._session_id is not None:
            log.warning(
                "the ACP agent cannot load sessions (no loadSession): session %s is lost, starting a new one",
                self._session_id,
            )
        answer = await agent.connection.request("session/new", to_wire(NewSessionRequest(cwd, servers)))
        created: NewSessionResponse = from_wire(answer, NewSessionResponse)
        self._session_id = agent.session = created.session_id
        self.config_options = created.config_options or []
        self._announce = True
        return created.session_id

    async def archive(self) -> None:
        """Forget the session: the next turn starts a new one (the system prompt goes with it)."""
        self._session_id = None
        if self._agent is not None:
            self._agent.session = None
        self.config_options = []
        self.context = None

    async def _apply_choices(self, agent: _Agent, session: str) -> None:
        """Model first, then effort (the efforts on offer depend on the model), each only if the
        session offers the value and does not hold it already."""
        for wanted, category in ((self.config.model, "model"), (self.config.effort, "thought_level")):
            option = self.option(category)
            if (
                not wanted
                or option is None
                or wanted not in option.values()
                or option.current_value == wanted
            ):
                continue
            answer = await agent.connection.request(
                "session/set_config_option", to_wire(SetConfigOptionRequest(session, option.id, wanted))
            )
            self.config_options = (
                from_wire(answer, SetConfigOptionResponse).config_options or self.config_options
            )

    # -- what the agent sends -------------------------------------------------------------------

    async def _on_request(self, method: str, params: Any) -> Any:
        if method != "session/request_permission":
            raise Unhandled(method)
        request: RequestPermissionRequest = from_wire(params, RequestPermissionRequest)
        if self._cancelling:
            return to_wire(RequestPermissionResponse(CancelledOutcome()))
        by_kind = {option.kind: option for option in request.options}
        choice = (
            by_kind.get(self.config.permission) or by_kind.get("allow_once") or by_kind.get("allow_always")
        )
        if choice is None:
            return to_wire(RequestPermissionResponse(CancelledOutcome()))
        return to_wire(RequestPermissionResponse(SelectedOutcome(choice.option_id)))

    async def _on_notification(self, method: str, params: Any) -> None:
        if method != "session/update":
            return
        try:
            notification: SessionNotification = from_wire(params, SessionNotification)
        except SchemaError as exc:
            log.warning("skipping a session/update hive cannot read: %s", exc)
            return
        update = notification.update
        if isinstance(update, AvailableCommandsUpdate):
            self.commands = [command.name for command in update.available_commands]
        elif isinstance(update, ConfigOptionUpdate):
            self.config_options = update.config_options
        elif isinstance(update, UsageUpdate):
            self.context = ContextUsage(used=update.used, size=update.size)
        translator = self._translator
        if translator is not None and notification.session_id == translator.session_id:
            running = self._stopper.running
            if running is not None and self.config.idle_timeout is not None:
                running.deadline = trio.current_time() + self.config.idle_timeout
            await translator.update(update)

    # -- turns ----------------------------------------------------------------------------------

    async def run(self, prompt: str, sink: Sink) -> TurnOutcome:
        outcome = await self._exclusive(prompt, sink)
        policy = self.config.compaction
        usage = outcome.usage
        if (
            outcome.stop_reason is StopReason.COMPLETED
            and policy.watermark is not None
            and usage is not None
            and usage.fraction is not None
            and usage.fraction >= policy.watermark
        ):
            log.info("context at %.0f%%: compacting", usage.fraction * 100)
            await self._compact(sink, proactive=True)
        return outcome

    async def _exclusive(self, prompt: str, sink: Sink, idle_timeout: float | None = None) -> TurnOutcome:
        if self._busy:
            raise TurnFailed("a turn is already running on this session; wait for it or cancel it first")
        self._busy = True
        try:
            with self._stopper.turn():
                return await self._turn(prompt, sink, idle_timeout)
        finally:
            self._busy = False

    async def _turn(self, prompt: str, sink: Sink, idle_timeout: float | None) -> TurnOutcome:
        agent = await self._ensure_agent()
        session = await self._ensure_session(agent)
        await self._apply_choices(agent, session)
        model_option = self.option("model")
        translator = Translator(session, sink, model=str(model_option.current_value) if model_option else "")
        if self._announce:
            self._announce = False
            info = attrs.asdict(agent.info) if agent.info else {}
            names = [server.name for server in self.config.mcp_servers]
            await translator.init(str(self.config.cwd), mcp_servers=names, commands=self.commands, agent=info)
        idle = idle_timeout if idle_timeout is not None else self.config.idle_timeout
        self._translator = translator
        try:
            return await self._prompt(agent, session, prompt, translator, idle)
        finally:
            self._translator = None
            self._cancelling = False

    async def _prompt(
        self, agent: _Agent, session: str, prompt: str, translator: Translator, idle: float | None
    ) -> TurnOutcome:
        connection = agent.connection
        pending = await connection.start_request(
            "session/prompt", to_wire(PromptRequest(session, [TextContent(prompt)]))
        )
        stopper = self._stopper
        answer: Any = None
        failure: AcpError | None = None
        stop_reason = StopReason.COMPLETED
        with trio.CancelScope() as running, stopper.running_in(running):
            if idle is not None:
                running.deadline = trio.current_time() + idle
            try:
                answer = await pending.wait()
            except AcpError as exc:
                failure = exc
        killed = False
        tool_running = translator.tool_running
        if running.cancelled_caught and not pending.done:
            stop_reason = StopReason.CANCELLED if stopper.requested else StopReason.IDLE
            # Whether a tool ran when the stop began: the agent may report it failed meanwhile.
            tool_running = translator.tool_running
            answer, failure, killed = await self._cancel(agent, session, pending)
        if isinstance(failure, AgentExited):
            stop_reason = StopReason.EXITED if stop_reason is StopReason.COMPLETED else stop_reason
        terminal = "aborted_tools" if tool_running else "aborted_streaming"
        result = await self._finish(
            translator,
            stop_reason=stop_reason,
            answer=answer,
            failure=failure,
            killed=killed,
            terminal=terminal,
        )
        outcome = TurnOutcome(
            stop_reason=stop_reason,
            session_id=session,
            is_error=result.is_error,
            synthesized=bool(result.extra.get("hive")),
            usage=translator.usage or self.context,
            tokens=dict(result.usage),
            result=result.result,
        )
        if translator.usage is not None:
            self.context = translator.usage
        if stop_reason is StopReason.IDLE:
            what = IdleKilled if killed else IdleTimeout
            raise what(
                f"the ACP agent sent nothing for {idle} s; the turn was cancelled"
                + (" and the agent, not answering, was sent SIGINT" if killed else "")
            )
        return outcome

    async def _cancel(self, agent: _Agent, session: str, pending: Any) -> tuple[Any, AcpError | None, bool]:
        """session/cancel, then the prompt's answer for at most CANCEL_GRACE; SIGINT if none
        came (the next turn starts a new agent). Shielded: a stop finishes what it starts."""
        self._cancelling = True
        answer: Any = None
        failure: AcpError | None = None
        with trio.CancelScope(shield=True):
            try:
                await agent.connection.notify("session/cancel", to_wire(CancelNotification(session)))
            except AcpError as exc:
                failure = exc
            with trio.move_on_after(CANCEL_GRACE) as grace, self._stopper.waiting_in(grace):
                try:
                    answer = await pending.wait()
                except AcpError as exc:
                    failure = exc
        if pending.done:
            return answer, failure, False
        log.warning(
            "the ACP agent did not answer its cancelled prompt within %.0f s; sending SIGINT", CANCEL_GRACE
        )
        agent.process.interrupt()
        agent.scope.cancel()
        if self._agent is agent:
            self._agent = None
        return None, None, True

    async def _finish(
        self,
        translator: Translator,
        *,
        stop_reason: StopReason,
        answer: Any,
        failure: AcpError | None,
        killed: bool,
        terminal: str,
    ) -> Any:
        stopped = stop_reason in (StopReason.CANCELLED, StopReason.IDLE)
        if answer is not None and failure is None:
            try:
                response: PromptResponse = from_wire(answer, PromptResponse)
            except SchemaError as exc:
                failure = exc
            else:
                if stopped or response.stop_reason == "cancelled":
                    # An agent may answer a cancelled prompt with end_turn (CLIENTS.md): it was cancelled.
                    return await translator.finish(
                        subtype="error_during_execution",
                        is_error=True,
                        stop_reason=None,
                        terminal_reason=terminal,
                        tokens=response.usage,
                        errors=["the turn was cancelled"],
                    )
                return await self._finish_answered(translator, response)
        if stopped and (
            failure is None or (isinstance(failure, JsonRpcError) and failure.code in CANCELLED_ERRORS)
        ):
            return await translator.finish(
                subtype="error_during_execution",
                is_error=True,
                stop_reason=None,
                terminal_reason=terminal,
                errors=[
                    "the turn was cancelled"
                    + ("; the agent did not answer and was sent SIGINT" if killed else "")
                ],
                hive={"synthesized": True, "stop_reason": stop_reason.value, "killed": killed}
                if killed
                else None,
            )
        reason = str(failure) if failure is not None else "the agent gave no answer"
        return await translator.finish(
            subtype="error_during_execution",
            is_error=True,
            stop_reason=None,
            terminal_reason="model_error",
            errors=[reason],
            hive={"synthesized": True, "stop_reason": stop_reason.value},
        )

    @staticmethod
    async def _finish_answered(translator: Translator, response: PromptResponse) -> Any:
        reason = response.stop_reason
        if reason == "max_turn_requests":
            return await translator.finish(
                subtype="error_max_turns",
                is_error=True,
                stop_reason=reason,
                terminal_reason="max_turns",
                tokens=response.usage,
                errors=["the agent reached its limit of model requests for one turn"],
            )
        return await translator.finish(
            subtype="success",
            is_error=False,
            stop_reason=reason,
            terminal_reason="completed",
            tokens=response.usage,
        )

    # -- compaction -----------------------------------------------------------------------------

    async def compact(self, sink: Sink) -> None:
        """The operator's /compact (or the agent's compact tool)."""
        await self._compact(sink, proactive=False)

    async def _compact(self, sink: Sink, *, proactive: bool) -> None:
        if self._session_id is None:
            return
        checkpointed = False
        if proactive:
            await self._exclusive(self.config.compaction.checkpoint_prompt, sink)
            checkpointed = True
        if "compact" in self.commands:
            bound = min(COMPACT_IDLE, self.config.idle_timeout or COMPACT_IDLE)
            try:
                outcome = await self._exclusive("/compact", sink, idle_timeout=bound)
            except (IdleTimeout, AcpError, TurnFailed) as exc:
                log.warning("the agent's compact command failed (%s); archiving the session instead", exc)
            else:
                if outcome.stop_reason is StopReason.COMPLETED and not outcome.is_error:
                    return
                log.warning("the agent's compact command did not complete; archiving the session instead")
        if not checkpointed:
            await self._exclusive(self.config.compaction.checkpoint_prompt, sink)
        await self.archive()

    async def close(self) -> None:
        await self._drop_agent()


@asynccontextmanager
async def open_acp_runtime(
    spec: RuntimeSpec, config: Config, session_id: str | None = None
) -> AsyncIterator[AcpRuntime]:
    """The ACP runtime: the agent is started and initialized before the block (an agent that
    cannot serve is refused here); leaving the block sends its process group SIGINT."""
    with one_error():
        async with trio.open_nursery() as background:
            runtime = AcpRuntime(spec, config, background, session_id)
            try:
                await runtime.start()
                yield runtime
            finally:
                with trio.CancelScope(shield=True):
                    await runtime.close()
                background.cancel_scope.cancel()
