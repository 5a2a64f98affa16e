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
