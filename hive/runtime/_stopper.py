"""The Canceller both backends hand out, and the one-turn-at-a-time gate they share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio

from hive.runtime._errors import TurnFailed


@attrs.define(eq=False)
class TurnStopper:
    """Cancels the running turn's scope (whose exit path is the backend's SIGINT path).

    A cancel while a turn is still being set up (spawning the agent, opening its session) is
    kept and acted on as soon as the turn's scope opens. While a stopped turn waits for the
    agent's own end, a second cancel stops that wait. Between turns it does nothing.

    It is also the gate: one turn at a time runs on a runtime (``turn`` refuses a second).
    """

    running: trio.CancelScope | None = None
    grace: trio.CancelScope | None = None
    requested: bool = False
    """Whether the Canceller (not a watchdog) stopped the current turn."""
    _setting_up: bool = False
    _busy: bool = False

    def cancel(self) -> None:
        """Stop the running turn (or the wait for its agent's own end, if it is already stopped)."""
        if self.grace is not None:
            self.grace.cancel()
        elif self.running is not None:
            self.requested = True
            self.running.cancel()
        elif self._setting_up:
            self.requested = True

    @contextmanager
    def turn(self) -> Iterator[None]:
        """The extent of one turn, from its setup to its end; TurnFailed if one is running."""
        if self._busy:
            raise TurnFailed("a turn is already running on this session; wait for it or cancel it first")
        self._busy, self.requested, self._setting_up = True, False, True
        try:
            yield
        finally:
            self._busy, self._setting_up, self.running, self.grace = False, False, None, None

    @contextmanager
    def running_in(self, scope: trio.CancelScope) -> Iterator[None]:
        """While the turn's own work runs in ``scope``; a cancel that came early cancels it now."""
        self.running = scope
        if self.requested:
            scope.cancel()
        try:
            yield
        finally:
            self.running = None

    @contextmanager
    def waiting_in(self, scope: trio.CancelScope) -> Iterator[None]:
        """While a stopped turn waits (in ``scope``) for the agent's own end."""
        self.grace = scope
        try:
            yield
        finally:
            self.grace = None
