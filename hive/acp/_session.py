"""The session and its choices: which session the turns continue, what it offers, how it is attached.

``SessionState`` owns the session id (kept across agent processes, so a new process loads it
again), the config options and commands the agent advertised, and the context usage it
reported. It attaches the session to a link (``session/load`` or ``session/new``) and sets
the configured model, then effort, on it.
"""

from __future__ import annotations

import logging

import attrs

from hive.acp._errors import JsonRpcError
from hive.acp._link import AgentLink
from hive.acp._schema import (
    AvailableCommandsUpdate,
    ConfigOption,
    ConfigOptionUpdate,
    EnvVariable,
    HttpHeader,
    LoadSessionRequest,
    LoadSessionResponse,
    McpServer,
    McpServerHttp,
    McpServerStdio,
    NewSessionRequest,
    NewSessionResponse,
    SessionUpdate,
    SetConfigOptionRequest,
    SetConfigOptionResponse,
    UsageUpdate,
    from_wire,
    to_wire,
)
from hive.runtime import Config, HttpServer, Progress, SessionNotFound, StdioServer
from hive.sink import ContextUsage

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SessionState:
    config: Config
    session_id: str | None = None
    config_options: list[ConfigOption] = attrs.field(factory=list)
    commands: list[str] = attrs.field(factory=list)
    context: ContextUsage | None = None
    announce: bool = False
    """Whether the next turn opens with a ``system`` init (a session newly attached)."""
    attached: bool = False

    def option(self, category: str) -> ConfigOption | None:
        """The first config option of ``category`` the attached session offers."""
        if not self.attached:
            return None
        return next((o for o in self.config_options if o.category == category), None)

    def observe(self, update: SessionUpdate) -> None:
        """Keep what a session/update says about the session itself."""
        if isinstance(update, AvailableCommandsUpdate):
            self.commands = [command.name for command in update.available_commands]
        elif isinstance(update, ConfigOptionUpdate):
            self.config_options = update.config_options
        elif isinstance(update, UsageUpdate):
            self.context = ContextUsage(used=update.used, size=update.size)

    def archive(self) -> None:
        """Forget the session: the next turn starts a new one."""
        self.session_id = None
        self.attached = False
        self.config_options = []
        self.context = None

    def detach(self) -> None:
        """The link went away: the next one attaches the session again."""
        self.attached = False

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

    async def attach(self, link: AgentLink, progress: Progress) -> str:
        """The session on ``link``: loaded if there is one to continue, else a new one.

        SessionNotFound if the agent refuses to load the session. An agent without
        ``loadSession`` cannot continue it: a new session starts, and the log says so.
        """
        if link.session is not None:
            return link.session
        cwd = str(self.config.cwd)
        servers = self._mcp_servers()
        if self.session_id is not None and link.capabilities.load_session:
            with progress.waiting(f"the ACP agent to answer session/load of {self.session_id}"):
                try:
                    answer = await link.connection.request(
                        "session/load", to_wire(LoadSessionRequest(self.session_id, cwd, servers))
                    )
                except JsonRpcError as exc:
                    raise SessionNotFound(self.session_id, f"session/load: {exc}") from None
            loaded: LoadSessionResponse = from_wire(answer, LoadSessionResponse)
            self.config_options = loaded.config_options or self.config_options
            return self._attached(link, self.session_id)
        if self.session_id is not None:
            log.warning(
                "the ACP agent cannot load sessions (no loadSession): session %s is lost, starting a new one",
                self.session_id,
            )
        with progress.waiting("the ACP agent to answer session/new"):
            answer = await link.connection.request("session/new", to_wire(NewSessionRequest(cwd, servers)))
        created: NewSessionResponse = from_wire(answer, NewSessionResponse)
        self.session_id = created.session_id
        self.config_options = created.config_options or []
        return self._attached(link, created.session_id)

    def _attached(self, link: AgentLink, session: str) -> str:
        link.session = session
        self.attached = self.announce = True
        return session

    async def apply_choices(self, link: AgentLink, session: str) -> None:
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
            answer = await link.connection.request(
                "session/set_config_option", to_wire(SetConfigOptionRequest(session, option.id, wanted))
            )
            self.config_options = (
                from_wire(answer, SetConfigOptionResponse).config_options or self.config_options
            )


@attrs.define(eq=False)
class AcpChoices:
    """The models and effort levels the attached session offers now (empty before one is)."""

    state: SessionState

    def models(self) -> tuple[str, ...]:
        """The values of the session's ``model`` option."""
        option = self.state.option("model")
        return tuple(option.values()) if option else ()

    def efforts(self) -> tuple[str, ...]:
        """The values of the session's ``thought_level`` option."""
        option = self.state.option("thought_level")
        return tuple(option.values()) if option else ()
