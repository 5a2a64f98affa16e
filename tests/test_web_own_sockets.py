"""``hive web`` (and the survey ``hive ls`` shares) reaches an agent only through its own sockets:
an ``agent.sock`` or ``bash.sock`` its user pointed at another agent's (a symlink, a hard link, a
socket of another owner) is refused for the agent's status, a prompt, a compaction and a task's
stop, and the page says why; nothing reaches the other agent."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import trio

from hive._unix import open_unix_listener
from hive.agent_socket import AgentRequest, AgentStatus, Status, serve_agent_socket
from hive.fleet import survey
from tests.helpers.web import base_of, hive_web

GUARD = 30
TOKEN = "t" * 32


@asynccontextmanager
async def web_over(root: Path, token_file: Path) -> AsyncIterator[str]:
    """A real ``hive web`` over ``root``, its token in ``token_file``: its base URL."""
    token_file.write_text(TOKEN)
    async with hive_web("--token-file", token_file, root) as (line, _):
        yield base_of(line)


@asynccontextmanager
async def other_agent(state_dir: Path) -> AsyncIterator[tuple[list[AgentRequest], list[str]]]:
    """An agent's harness (answering ``status`` with ``state_dir``) and bash daemon on their
    sockets in ``state_dir``: what each was sent (the bash daemon: one entry a connection)."""
    state_dir.mkdir(mode=0o700)
    (state_dir / "queue").write_bytes(b"")
    requests: list[AgentRequest] = []
    connections: list[str] = []

    async def harness(request: AgentRequest) -> AgentStatus:
        requests.append(request)
        return AgentStatus(state="idle", state_dir=str(state_dir))

    async def bash_daemon(stream: trio.SocketStream) -> None:
        connections.append("connected")
        await stream.aclose()

    async with open_unix_listener(state_dir / "bash.sock") as bash, trio.open_nursery() as nursery:
        await nursery.start(serve_agent_socket, state_dir / "agent.sock", harness)
        nursery.start_soon(trio.serve_listeners, bash_daemon, [bash])
        yield requests, connections
        nursery.cancel_scope.cancel()


async def test_hive_web_refuses_sockets_symlinked_to_another_agents(short_tmp: Path) -> None:
    alpha, beta = short_tmp / "agents" / "alpha", short_tmp / "agents" / "beta"
    alpha.mkdir(mode=0o700, parents=True)
    (alpha / "queue").write_bytes(b"")
    with trio.fail_after(GUARD):
        async with other_agent(beta) as (told, connected):
            (alpha / "agent.sock").symlink_to(beta / "agent.sock")
            (alpha / "bash.sock").symlink_to(beta / "bash.sock")
            async with (
                web_over(short_tmp / "agents", short_tmp / "token") as base,
                httpx2.AsyncClient(
                    base_url=base, timeout=GUARD, headers={"Authorization": f"Bearer {TOKEN}", "Origin": base}
                ) as client,
            ):
                fleet = {agent["name"]: agent for agent in (await client.get("/fleet.json")).json()}
                page = await client.get("/agent/alpha")
                prompt = await client.post("/agent/alpha/prompt", data={"text": "meant for alpha"})
                compact = await client.post("/agent/alpha/compact")
                stop = await client.post("/agent/alpha/tasks/slow/stop")
    assert fleet["beta"]["harness"] == "running"
    assert fleet["alpha"]["harness"] == "not its own socket", fleet["alpha"]
    assert f"{alpha / 'agent.sock'} is a symlink" in fleet["alpha"]["refused"]
    assert page.status_code == 200 and f"{alpha / 'agent.sock'} is a symlink" in page.text
    for answer, socket in ((prompt, "agent.sock"), (compact, "agent.sock"), (stop, "bash.sock")):
        assert answer.status_code == 502, answer.text
        assert answer.text.startswith("not the agent's own socket: ")
        assert f"{alpha / socket} is a symlink" in answer.text
    assert all(isinstance(request, Status) for request in told), told
    assert connected == []


async def test_a_hard_link_to_another_agents_socket_is_refused_by_its_harness_answer(
    short_tmp: Path,
) -> None:
    """Not a symlink and owned as its state dir, but the harness that answers is another agent's."""
    alpha, beta = short_tmp / "alpha", short_tmp / "beta"
    alpha.mkdir(mode=0o700)
    with trio.fail_after(GUARD):
        async with other_agent(beta):
            os.link(beta / "agent.sock", alpha / "agent.sock")
            view = await survey(alpha)
            own = await survey(beta)
    assert (own.harness, own.refused) == ("running", None)
    assert view.harness == "not its own socket"
    assert view.refused == (
        f"the harness answering on {alpha / 'agent.sock'} is the one of {beta}, not of {alpha}: "
        "remove the socket, and restart the agent's harness"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a socket to another user needs root")
async def test_a_socket_owned_by_another_user_than_its_state_dir_is_refused(short_tmp: Path) -> None:
    beta = short_tmp / "beta"
    with trio.fail_after(GUARD):
        async with other_agent(beta):
            os.chown(beta / "agent.sock", 4242, -1, follow_symlinks=False)
            view = await survey(beta)
    assert view.harness == "not its own socket"
    assert view.refused == (
        f"{beta / 'agent.sock'} belongs to uid 4242, its state dir to uid 0: "
        "remove the socket, and restart the agent's harness"
    )
