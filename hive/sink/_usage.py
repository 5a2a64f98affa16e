"""How full an agent's context window is (no Trio here: the runtime's configuration needs it
before hive has imported Trio)."""

from __future__ import annotations

import attrs


@attrs.frozen
class ContextUsage:
    """How full the agent's context window is: ``used`` of ``size`` tokens (size 0 if unknown)."""

    used: int
    size: int = 0

    @property
    def fraction(self) -> float | None:
        """``used`` as a share of ``size``; None while the size is unknown."""
        return self.used / self.size if self.size else None


@attrs.frozen
class SessionCost:
    """What one agent session has cost so far, in USD, as its agent last reported it.

    Both backends report a session's cost cumulatively, not a turn's: claude's ``result`` line
    has ``total_cost_usd`` (and ``modelUsage``) summed over the whole session, across the
    ``--resume`` of each turn's process and across ``/compact`` (which keeps the session id and
    adds the summary's cost), while its ``usage`` counts that turn's API calls alone (checked on
    Claude Code 2.1.318 against the fake Messages API: four resumed turns and a compaction
    reported 0.00022, 0.00044, 0.00066, 0.00088, 0.0011, each ``usage`` 50 in / 12 out). ACP's
    ``usage_update.cost.amount`` is the "cumulative session cost" by the protocol's schema
    (claude-agent-acp sends claude's ``total_cost_usd`` there), while its ``PromptResponse.usage``
    is the prompt turn's. So a turn's cost is how much its session's reported cost grew.
    """

    session_id: str | None = None
    usd: float = 0.0

    def after(self, session_id: str | None, reported: float | None) -> tuple[float, SessionCost]:
        """What a turn that reported its session ``session_id`` at a cumulative ``reported`` USD
        cost, and the session's cost after it.

        A new session counts from zero. A report of nothing (none, or not above zero: a turn
        hive synthesized, an ACP turn that sent no cost) costs nothing and keeps the base, so
        the next report is measured from the last real one. A report below the base means the
        agent lost its count of the session: it is taken as counted from zero again."""
        if session_id is None:
            return 0.0, self
        known = session_id == self.session_id
        if reported is None or not reported > 0:
            return 0.0, (self if known else SessionCost(session_id))
        spent = reported - self.usd if known and reported >= self.usd else reported
        return round(spent, 12), SessionCost(session_id, reported)


@attrs.define
class TurnCost:
    """The cost of one turn, summed over the result lines its stream shows (a turn may hold
    several: claude's checkpoint and ``/compact`` after a turn past the watermark, an ACP
    compaction's turns), each measured from the session's cost before it (`SessionCost`)."""

    session: SessionCost = attrs.field(factory=SessionCost)
    """The session's cost so far: before the turn, then after each of its results."""
    usd: float = 0.0
    """What the turn has cost so far."""

    def result(self, session_id: object, total_cost_usd: object) -> None:
        """Count a result line's ``session_id`` and ``total_cost_usd`` (anything else in those
        fields counts as not reported)."""
        reported = (
            float(total_cost_usd)
            if isinstance(total_cost_usd, int | float) and not isinstance(total_cost_usd, bool)
            else None
        )
        spent, self.session = self.session.after(
            session_id if isinstance(session_id, str) else None, reported
        )
        self.usd = round(self.usd + spent, 12)
