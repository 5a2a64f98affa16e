"""What a caller adds to the environment of the agents its turns spawn (a trace's
``TRACEPARENT``, say), without a parameter on every runtime: a context variable, read as each
agent process is spawned, so it holds for the turns run inside `agent_environment`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

_ADDED: ContextVar[Mapping[str, str]] = ContextVar("hive_agent_environment", default=MappingProxyType({}))


@contextmanager
def agent_environment(added: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, every agent a turn spawns also gets ``added`` in its environment."""
    token = _ADDED.set({**_ADDED.get(), **added})
    try:
        yield
    finally:
        _ADDED.reset(token)


def added_environment() -> Mapping[str, str]:
    """What `agent_environment` adds here (nothing outside one)."""
    return _ADDED.get()
